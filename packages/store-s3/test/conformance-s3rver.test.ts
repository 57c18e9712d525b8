import { describeS3rverConformance } from './conformance-suites.ts';

describeS3rverConformance();

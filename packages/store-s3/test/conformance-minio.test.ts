import { describeConditionalServerConformance } from './conformance-suites.ts';

describeConditionalServerConformance('minio');

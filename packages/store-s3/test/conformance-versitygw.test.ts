import {
  describeConditionalServerConformance,
  describeExpectationLists,
} from './conformance-suites.ts';

describeExpectationLists();
describeConditionalServerConformance('versitygw');

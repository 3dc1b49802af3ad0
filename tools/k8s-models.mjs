// The kubernetes-models schemas the chart's objects use, re-exported from here so that tests
// elsewhere in the tree resolve them from tools/node_modules.
export * as v1 from "kubernetes-models/v1";
export * as appsV1 from "kubernetes-models/apps/v1";
export * as batchV1 from "kubernetes-models/batch/v1";

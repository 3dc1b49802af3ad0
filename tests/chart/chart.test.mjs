// The Helm chart, rendered by the real Helm 4 and validated against the Kubernetes schemas
// (kubernetes-models), plus the k8s/ overlays and the dashboard kept in step with it.
// Run: node --test tests/chart/chart.test.mjs (scripts/test does, through CTest).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const require = createRequire(path.join(root, "tools/package.json"));
const yaml = require("js-yaml");
const helm = path.join(root, "tools/bin/helm");
const kubectl = path.join(root, "tools/bin/kubectl");
const chart = path.join(root, "charts/prewarm");

// `sets` are --set values, or a flag followed by its value ("--api-versions", "x/v1/Kind").
function render(...sets) {
  const args = ["template", "prewarm", chart, "--namespace", "default"];
  for (let i = 0; i < sets.length; ++i) {
    if (sets[i].startsWith("--")) args.push(sets[i], sets[++i]);
    else args.push("--set", sets[i]);
  }
  const out = execFileSync(helm, args, { encoding: "utf8" });
  return yaml.loadAll(out).filter(Boolean);
}
function renderFails(...sets) {
  const args = ["template", "prewarm", chart];
  for (const s of sets) args.push("--set", s);
  const r = spawnSync(helm, args, { encoding: "utf8" });
  return { code: r.status, stderr: r.stderr };
}

// kubernetes-models classes by apiVersion and kind.
const models = await import(path.join(root, "tools/k8s-models.mjs"));
const modules = { v1: models.v1, "apps/v1": models.appsV1, "batch/v1": models.batchV1 };
function validate(obj) {
  if (obj.apiVersion.startsWith("monitoring.coreos.com/")) {
    // No schema for the operator's CRDs here: check what the chart relies on.
    assert.ok(obj.spec.selector.matchLabels, `${obj.kind} selects by labels`);
    return;
  }
  const Model = modules[obj.apiVersion]?.[obj.kind];
  assert.ok(Model, `no schema for ${obj.apiVersion} ${obj.kind}`);
  new Model(obj).validate(); // throws with the path of the first violation
}
const find = (docs, kind, name) => docs.find((d) => d.kind === kind && (!name || d.metadata.name === name));
const env = (c) => Object.fromEntries((c.env || []).map((e) => [e.name, e.value]));

test("helm lint --strict passes", () => {
  const r = spawnSync(helm, ["lint", "--strict", chart], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});

for (const mode of ["sidecar", "init"]) {
  for (const kind of ["emptyDir", "pvc", "hostPath"]) {
    test(`renders valid objects: mode=${mode} volume=${kind}`, () => {
      const docs = render(`prewarm.mode=${mode}`, `prewarm.volume.kind=${kind}`);
      for (const d of docs) validate(d);
      const dep = find(docs, "Deployment");
      const pod = dep.spec.template.spec;
      const [prewarm] = pod.initContainers;
      const vllm = pod.containers.find((c) => c.name === "vllm");
      assert.equal(prewarm.name, "prewarm");
      if (mode === "sidecar") {
        assert.equal(prewarm.restartPolicy, "Always", "a native sidecar");
        assert.deepEqual(prewarm.startupProbe.grpc, { port: 9401, service: "prewarm" });
        assert.deepEqual(prewarm.readinessProbe.grpc, { port: 9401, service: "prewarm" });
        assert.deepEqual(prewarm.args, ["run", "--serve"]);
      } else {
        assert.equal(prewarm.restartPolicy, undefined);
        assert.equal(prewarm.startupProbe, undefined);
        assert.deepEqual(prewarm.args, ["run"]);
        assert.equal(prewarm.resources.requests.cpu, "8", "init mode asks for CPUs to compile with");
      }
      // No GPU on the prewarmer; the server gets them.
      const gpuKeys = (r) => Object.keys({ ...(r?.limits || {}), ...(r?.requests || {}) }).filter((k) => k.includes("gpu"));
      assert.deepEqual(gpuKeys(prewarm.resources), []);
      assert.equal(vllm.resources.limits["amd.com/gpu"], 8);
      // Security contexts (DESIGN.md section 9).
      const sc = prewarm.securityContext;
      assert.equal(sc.runAsNonRoot, true);
      assert.equal(sc.readOnlyRootFilesystem, true);
      assert.equal(sc.allowPrivilegeEscalation, false);
      assert.deepEqual(sc.capabilities.drop, ["ALL"]);
      assert.equal(sc.seccompProfile.type, "RuntimeDefault");
      assert.deepEqual(pod.securityContext.supplementalGroups, [44, 110]);
      // The cache volume, mounted in both, with every JIT's cache directory in it.
      const vol = pod.volumes.find((v) => v.name === "cache");
      assert.ok(vol[{ emptyDir: "emptyDir", pvc: "persistentVolumeClaim", hostPath: "hostPath" }[kind]]);
      for (const c of [prewarm, vllm]) {
        assert.ok(c.volumeMounts.some((m) => m.name === "cache" && m.mountPath === "/cache"), c.name);
      }
      assert.ok(prewarm.volumeMounts.some((m) => m.mountPath === "/tmp"), "hipRTC's temp files");
      const ve = env(vllm);
      assert.equal(ve.PREWARM_CACHE_DIR, "/cache");
      assert.equal(ve.FLYDSL_RUNTIME_CACHE_DIR, "/cache/flydsl");
      assert.equal(ve.TRITON_CACHE_DIR, "/cache/triton");
      if (kind === "pvc") assert.ok(find(docs, "PersistentVolumeClaim"));
      else assert.equal(find(docs, "PersistentVolumeClaim"), undefined);
    });
  }
}

const cacheImage = "registry.example.com/ml/prewarm-cache:dsv32-gfx942-v1";
for (const mode of ["sidecar", "init"]) {
  test(`renders valid objects: mode=${mode} volume=image (a packed cache, read-only, verified)`, () => {
    const docs = render(`prewarm.mode=${mode}`, "prewarm.volume.kind=image",
      `prewarm.volume.image.reference=${cacheImage}`, "prewarm.volume.image.pullPolicy=Always");
    for (const d of docs) validate(d);
    const pod = find(docs, "Deployment").spec.template.spec;
    const [prewarm] = pod.initContainers;
    const vllm = pod.containers.find((c) => c.name === "vllm");
    // The image volume source (Kubernetes 1.31+): the reference and the pull policy as given.
    const vol = pod.volumes.find((v) => v.name === "cache");
    assert.deepEqual(vol, { name: "cache", image: { reference: cacheImage, pullPolicy: "Always" } });
    // The prewarmer verifies, it never compiles into the read-only volume.
    assert.deepEqual(prewarm.args, mode === "sidecar" ? ["verify", "--serve"] : ["verify"]);
    if (mode === "sidecar") assert.deepEqual(prewarm.startupProbe.grpc, { port: 9401, service: "prewarm" });
    for (const c of [prewarm, vllm]) {
      const m = c.volumeMounts.find((v) => v.name === "cache");
      assert.equal(m.mountPath, "/cache", c.name);
      assert.equal(m.readOnly, true, `${c.name} mounts the image read-only`);
    }
    // The server's own JIT caches cannot live in a read-only image: an emptyDir takes them.
    const ve = env(vllm);
    assert.equal(ve.PREWARM_CACHE_DIR, "/cache");
    assert.equal(ve.FLYDSL_RUNTIME_CACHE_DIR, "/jit-cache/flydsl");
    assert.equal(ve.TRITON_CACHE_DIR, "/jit-cache/triton");
    assert.ok(vllm.volumeMounts.some((m) => m.name === "jit-cache" && m.mountPath === "/jit-cache" && !m.readOnly));
    assert.deepEqual(pod.volumes.find((v) => v.name === "jit-cache"), { name: "jit-cache", emptyDir: {} });
    assert.equal(find(docs, "PersistentVolumeClaim"), undefined);
  });
}

test("an image volume needs its reference, well formed, and cannot be pre-filled", () => {
  let r = renderFails("prewarm.volume.kind=image");
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /prewarm\/volume\/image\/reference/, r.stderr);
  r = renderFails("prewarm.volume.kind=image", "prewarm.volume.image.reference=Registry/UPPER:tag");
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /reference.*does not match/, r.stderr);
  r = renderFails("prewarm.volume.kind=image", `prewarm.volume.image.reference=${cacheImage}`,
    "prewarm.volume.image.pullPolicy=Sometimes");
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /pullPolicy/, r.stderr);
  r = renderFails("prewarm.volume.kind=image", `prewarm.volume.image.reference=${cacheImage}`, "prefill.enabled=true");
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /needs prewarm.volume.kind=pvc/);
  // A digest pins the image.
  const digest = `registry.example.com/ml/prewarm-cache@sha256:${"a".repeat(64)}`;
  const pod = find(render("prewarm.volume.kind=image", `prewarm.volume.image.reference=${digest}`), "Deployment").spec.template.spec;
  assert.equal(pod.volumes.find((v) => v.name === "cache").image.reference, digest);
});

test("one set of limits feeds vLLM's arguments and the prewarmer's environment", () => {
  const docs = render("limits.maxNumSeqs=64", "limits.maxNumBatchedTokens=4096", "limits.maxModelLen=65536",
    "limits.numSpeculativeTokens=2", "limits.maxCudagraphCaptureSize=128", "limits.tensorParallelSize=4",
    "limits.blockSize=32", "limits.kvCacheDtype=fp8");
  const pod = find(docs, "Deployment").spec.template.spec;
  const pe = env(pod.initContainers[0]);
  const args = pod.containers.find((c) => c.name === "vllm").args;
  const arg = (flag) => args[args.indexOf(flag) + 1];
  for (const [flag, envName] of [["--max-num-seqs", "PREWARM_MAX_NUM_SEQS"],
    ["--max-num-batched-tokens", "PREWARM_MAX_NUM_BATCHED_TOKENS"], ["--max-model-len", "PREWARM_MAX_MODEL_LEN"],
    ["--tensor-parallel-size", "PREWARM_TENSOR_PARALLEL_SIZE"], ["--block-size", "PREWARM_BLOCK_SIZE"],
    ["--kv-cache-dtype", "PREWARM_KV_CACHE_DTYPE"]]) {
    assert.equal(arg(flag), pe[envName], flag);
  }
  assert.equal(pe.PREWARM_MAX_NUM_SEQS, "64");
  assert.equal(JSON.parse(arg("-O")).max_cudagraph_capture_size, Number(pe.PREWARM_MAX_CUDAGRAPH_CAPTURE_SIZE));
  assert.equal(JSON.parse(arg("--speculative-config")).num_speculative_tokens, Number(pe.PREWARM_NUM_SPECULATIVE_TOKENS));
  // And the prewarm binary reads exactly these: its own parser on vLLM's command line agrees.
  const prewarm = path.join(root, "build/prewarm/prewarm");
  const plan = spawnSync(prewarm, ["plan", "--format", "json", "--arch", "gfx942", "--vllm-args", args.map((a) => `'${a}'`).join(" ")],
    { encoding: "utf8" });
  if (plan.status === 0) {
    const limits = JSON.parse(plan.stdout).limits;
    assert.equal(String(limits.max_num_seqs), pe.PREWARM_MAX_NUM_SEQS);
    assert.equal(String(limits.num_speculative_tokens), pe.PREWARM_NUM_SPECULATIVE_TOKENS);
    assert.equal(String(limits.max_cudagraph_capture_size), pe.PREWARM_MAX_CUDAGRAPH_CAPTURE_SIZE);
  } else {
    assert.fail(`prewarm plan --vllm-args failed: ${plan.stderr}`);
  }
});

test("monitors render only when enabled and the API exists", () => {
  const api = ["--api-versions", "monitoring.coreos.com/v1/ServiceMonitor", "--api-versions", "monitoring.coreos.com/v1/PodMonitor"];
  let docs = render("serviceMonitor.enabled=true", "podMonitor.enabled=true");
  assert.equal(find(docs, "ServiceMonitor"), undefined, "no API, no ServiceMonitor");
  docs = render("serviceMonitor.enabled=true", "podMonitor.enabled=true", ...api);
  for (const k of ["ServiceMonitor", "PodMonitor"]) {
    const m = find(docs, k);
    assert.ok(m, k);
    validate(m);
  }
  docs = render(...api);
  assert.equal(find(docs, "ServiceMonitor"), undefined, "not enabled");
});

test("the dashboard ConfigMap carries the dashboard", () => {
  const cm = find(render(), "ConfigMap");
  assert.equal(cm.metadata.labels.grafana_dashboard, "1");
  const dash = JSON.parse(cm.data["prewarm-startup.json"]);
  assert.equal(dash.schemaVersion, 39);
  assert.equal(dash.__inputs, undefined);
  assert.ok(dash.templating.list.some((v) => v.name === "DS_PROMETHEUS" && v.type === "datasource"));
  assert.equal(readFileSync(path.join(root, "dashboards/prewarm-startup.json"), "utf8"),
    readFileSync(path.join(chart, "dashboards/prewarm-startup.json"), "utf8"), "dashboards/ and the chart's copy differ");
});

test("the prefill Indexed Job shards one plan over a PVC", () => {
  const docs = render("prefill.enabled=true", "prewarm.volume.kind=pvc", "prefill.shards=6");
  const job = find(docs, "Job");
  validate(job);
  assert.equal(job.spec.completionMode, "Indexed");
  assert.equal(job.spec.completions, 6);
  assert.deepEqual(job.spec.template.spec.containers[0].args, ["run", "--shard", "$(JOB_COMPLETION_INDEX)/6"]);
  const r = renderFails("prefill.enabled=true");
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /needs prewarm.volume.kind=pvc/);
});

test("the helm test hook runs prewarm probe against the service", () => {
  const pod = render().find((d) => d.kind === "Pod");
  validate(pod);
  assert.equal(pod.metadata.annotations["helm.sh/hook"], "test");
  assert.deepEqual(pod.spec.containers[0].args.slice(0, 2), ["probe", "--addr"]);
  assert.equal(pod.spec.containers[0].args[2], "prewarm:9401");
});

for (const [set, field] of [["prewarm.mode=daemon", "mode"], ["limits.maxNumSeqs=-1", "maxNumSeqs"],
  ["prewarm.volume.kind=nfs", "kind"], ["limits.kvCacheDtype=int4", "kvCacheDtype"], ["prewarm.arch=gfx9999", "arch"],
  ["limits.tensorParallelSize=0", "tensorParallelSize"]]) {
  test(`values.schema.json rejects ${set}`, () => {
    const r = renderFails(set);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, new RegExp(field), r.stderr);
  });
}

test("k8s/ overlays are in step with the chart", () => {
  // Key order differs between Helm's output and kustomize's; compare canonical forms.
  const canon = (v) => Array.isArray(v) ? v.map(canon)
    : v && typeof v === "object" ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, canon(v[k])])) : v;
  const norm = (docs) => JSON.stringify(canon(docs.filter((d) => !(d.metadata.annotations || {})["helm.sh/hook"] && d.kind !== "ConfigMap")
    .sort((a, b) => (a.kind + a.metadata.name).localeCompare(b.kind + b.metadata.name))));
  for (const [dir, sets] of [["base", []], ["overlays/init", ["prewarm.mode=init"]], ["overlays/pvc", ["prewarm.volume.kind=pvc"]],
    ["overlays/image", ["prewarm.volume.kind=image", "prewarm.volume.image.reference=registry.example.com/ml/prewarm-cache:v1"]]]) {
    const out = execFileSync(kubectl, ["kustomize", path.join(root, "k8s", dir)], { encoding: "utf8" });
    const kust = yaml.loadAll(out).filter(Boolean);
    for (const d of kust) validate(d);
    assert.equal(norm(kust), norm(render(...sets)), `k8s/${dir} differs from the chart: run scripts/gen-k8s`);
  }
});

// The Helm chart, rendered by the real Helm 4 and validated against the Kubernetes schemas
// (kubernetes-models), plus the k8s/ overlays and the dashboard kept in step with it.
// Run: node --test tests/chart/chart.test.mjs (scripts/test does, through CTest).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
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
      // Security contexts (docs/chart.md, "The pod").
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

// vLLM's command line, built once (issue 31 item 2). The server runs [command, ...args]; the
// prewarmer (and the prefill Job) read PREWARM_VLLM_ARGS, the same words shell-quoted.
const prewarmBin = path.join(root, "build/prewarm/prewarm");
const limitVars = ["PREWARM_MAX_NUM_SEQS", "PREWARM_MAX_NUM_BATCHED_TOKENS", "PREWARM_MAX_MODEL_LEN",
  "PREWARM_NUM_SPECULATIVE_TOKENS", "PREWARM_MAX_CUDAGRAPH_CAPTURE_SIZE", "PREWARM_TENSOR_PARALLEL_SIZE",
  "PREWARM_BLOCK_SIZE", "PREWARM_KV_CACHE_DTYPE", "PREWARM_DECODE_CONTEXT_PARALLEL_SIZE"];
// The words a POSIX shell makes of a line: the real sh, not a second copy of the chart's quoting.
function shellWords(line) {
  const r = spawnSync("sh", ["-c", 'eval "set -- $1" && printf "%s\\0" "$@"', "sh", line], { encoding: "utf8" });
  assert.equal(r.status, 0, `sh cannot split ${line}: ${r.stderr}`);
  return r.stdout.split("\0").slice(0, -1);
}
function servingPod(docs) {
  const pod = find(docs, "Deployment").spec.template.spec;
  return { prewarm: pod.initContainers.find((c) => c.name === "prewarm"), vllm: pod.containers.find((c) => c.name === "vllm") };
}
const argv = (vllm) => [...vllm.command, ...vllm.args];
// `prewarm plan --format json` under exactly the environment the chart gives the container
// (nothing else: no PREWARM_* of this machine leaks in). The model config is mounted in a pod, not here.
function planInPod(container) {
  const e = { PATH: process.env.PATH, ...env(container) };
  delete e.PREWARM_MODEL_CONFIG;
  const r = spawnSync(prewarmBin, ["plan", "--format", "json"], { env: e, encoding: "utf8", maxBuffer: 1 << 28 });
  assert.equal(r.status, 0, `prewarm plan with the chart's environment failed (exit ${r.status}): ${r.stderr}`);
  return JSON.parse(r.stdout);
}
// How often any spelling of one setting is on the line.
const count = (words, spellings) => words.filter((w) => spellings.some((s) => w === s || w.startsWith(`${s}=`) || w.startsWith(`${s}.`))).length;

test("the prewarmer's PREWARM_VLLM_ARGS is, word for word, the command line vLLM runs", () => {
  const odd = ["--served-model-name", "it's $HOME `x` \\ \"q\" *", "--api-key", "", "--hf-overrides",
    '{"index_topk":1024,"note":"it\'s $x \\\\ \\""}'];
  for (const sets of [[], ["prewarm.mode=init"], ["limits.numSpeculativeTokens=2", "vllm.model=org/My Model"],
    ["--set-json", `vllm.extraArgs=${JSON.stringify(odd)}`],
    ["prefill.enabled=true", "prewarm.volume.kind=pvc", "--set-json", `vllm.extraArgs=${JSON.stringify(odd)}`]]) {
    const docs = render(...sets);
    const { prewarm, vllm } = servingPod(docs);
    const words = argv(vllm);
    assert.deepEqual(words.slice(0, 2), ["vllm", "serve"]);
    const containers = [prewarm, ...docs.filter((d) => d.kind === "Job").map((j) => j.spec.template.spec.containers[0])];
    for (const c of containers) {
      assert.deepEqual(shellWords(env(c).PREWARM_VLLM_ARGS), words, `${sets.join(" ")}: ${c.name}`);
      // A PREWARM_<LIMIT> variable outranks the line in the binary: none may be set.
      assert.deepEqual(Object.keys(env(c)).filter((n) => limitVars.includes(n)), [], sets.join(" "));
    }
    if (sets.includes("--set-json")) {
      // The binary takes the rendered line as it is: the JSON with a quote in it arrives whole.
      assert.equal(planInPod(prewarm).shape.index_topk, 1024);
    }
  }
});

test("the chart's limits land on the one line, and the prewarmer plans for them", () => {
  const docs = render("limits.maxNumSeqs=64", "limits.maxNumBatchedTokens=4096", "limits.maxModelLen=65536",
    "limits.numSpeculativeTokens=2", "limits.maxCudagraphCaptureSize=128", "limits.tensorParallelSize=4",
    "limits.blockSize=32", "limits.kvCacheDtype=fp8", "vllm.port=8080");
  const { prewarm, vllm } = servingPod(docs);
  const words = argv(vllm);
  const arg = (flag) => words[words.indexOf(flag) + 1];
  assert.equal(arg("--max-num-seqs"), "64");
  assert.equal(arg("--port"), "8080");
  assert.equal(JSON.parse(arg("--compilation-config")).max_cudagraph_capture_size, 128);
  assert.deepEqual(JSON.parse(arg("--speculative-config")), { method: "mtp", num_speculative_tokens: 2 });
  const { limits } = planInPod(prewarm);
  assert.deepEqual([limits.max_num_seqs, limits.max_num_batched_tokens, limits.max_model_len, limits.num_speculative_tokens,
    limits.max_cudagraph_capture_size, limits.tensor_parallel_size, limits.block_size, limits.kv_cache_dtype],
  [64, 4096, 65536, 2, 128, 4, 32, "fp8"]);
  // Numbers a values file gives as floats stay integers on the line (1e+06 would be refused).
  const big = servingPod(render("--set-json", "limits.maxModelLen=1000000"));
  assert.equal(planInPod(big.prewarm).limits.max_model_len, 1000000);
});

// [extraArgs, spellings of the setting (each on the line once), what the prewarmer must plan, extra --set]
const planFlags = [
  [["-dcp", "2"], ["-dcp", "--decode-context-parallel-size"], (p) => p.limits.decode_context_parallel_size === 2],
  [["--max-model-len", "131072"], ["--max-model-len"], (p) => p.limits.max_model_len === 131072],
  [["--max_model_len=65536"], ["--max-model-len", "--max_model_len"], (p) => p.limits.max_model_len === 65536],
  [["-tp", "4"], ["-tp", "--tensor-parallel-size"], (p) => p.limits.tensor_parallel_size === 4],
  [["--max-num-seqs", "64"], ["--max-num-seqs"], (p) => p.limits.max_num_seqs === 64],
  [["--max-num-batched-tokens", "4096"], ["--max-num-batched-tokens"], (p) => p.limits.max_num_batched_tokens === 4096],
  [["--block-size", "32"], ["--block-size"], (p) => p.limits.block_size === 32],
  [["--kv-cache-dtype", "fp8"], ["--kv-cache-dtype"], (p) => p.limits.kv_cache_dtype === "fp8"],
  [["--speculative-config", '{"method":"mtp","num_speculative_tokens":2}'], ["--speculative-config"],
    (p) => p.limits.num_speculative_tokens === 2, ["limits.numSpeculativeTokens=1"]],
  [["--num-speculative-tokens", "3"], ["--num-speculative-tokens", "--speculative-config"],
    (p) => p.limits.num_speculative_tokens === 3, ["limits.numSpeculativeTokens=1"]],
  [["-O", '{"max_cudagraph_capture_size":128}'], ["-O", "--compilation-config"], (p) => p.limits.max_cudagraph_capture_size === 128],
  [["--cuda-graph-sizes", "1", "2", "4", "64"], ["--cuda-graph-sizes", "--compilation-config"],
    (p) => p.limits.max_cudagraph_capture_size === 64],
  [["--hf-overrides", '{"index_topk":1024}'], ["--hf-overrides"], (p) => p.shape.index_topk === 1024],
  // An optimization level is not a compilation config: the chart's capture size stays.
  [["-O3"], ["--compilation-config"], (p) => p.limits.max_cudagraph_capture_size === 128,
    ["limits.maxCudagraphCaptureSize=128"]],
];
for (const [extra, spellings, planned, sets = []] of planFlags) {
  test(`vllm.extraArgs ${extra.join(" ")}: set once, in both containers, planned by the prewarmer`, () => {
    const docs = render(...sets, "--set-json", `vllm.extraArgs=${JSON.stringify(extra)}`);
    const { prewarm, vllm } = servingPod(docs);
    const words = argv(vllm);
    for (const [who, w] of [["vllm", words], ["prewarm", shellWords(env(prewarm).PREWARM_VLLM_ARGS)]]) {
      assert.equal(count(w, spellings), 1, `${who}: ${spellings.join("/")} once in ${JSON.stringify(w)}`);
      const at = w.indexOf(extra[0]);
      assert.deepEqual(w.slice(at, at + extra.length), extra, `${who} has the words as given`);
    }
    const plan = planInPod(prewarm);
    assert.ok(planned(plan), `prewarm planned ${JSON.stringify({ limits: plan.limits, topk: plan.shape.index_topk })}`);
  });
}

test("NOTES print the one command line", () => {
  const r = spawnSync(helm, ["install", "prewarm", chart, "--dry-run=client", "--set-json",
    'vllm.extraArgs=["-dcp","2"]'], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  const notes = r.stdout.slice(r.stdout.indexOf("NOTES:"));
  assert.match(notes, /vllm serve deepseek-ai\/DeepSeek-V3\.2 --tensor-parallel-size 8 --kv-cache-dtype nvfp4 --port 8000 -dcp 2\n/);
});

// The prewarmer of an image volume must be the prewarm image that packed it (issue 31 item 3).
test("an image volume's packedBy must be the prewarmer image; unset, NOTES warn", () => {
  const image = ["prewarm.volume.kind=image", `prewarm.volume.image.reference=${cacheImage}`];
  let r = renderFails(...image, "prewarm.volume.image.packedBy=registry.example.com/prewarm:0.2.0");
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /packedBy \(registry\.example\.com\/prewarm:0\.2\.0\) is not the prewarmer image \(ghcr\.io\/prewarm\/prewarm:0\.1\.0\)/, r.stderr);
  const docs = render(...image, "prewarm.image.repository=registry.example.com/prewarm", "prewarm.image.tag=0.2.0",
    "prewarm.volume.image.packedBy=registry.example.com/prewarm:0.2.0");
  assert.equal(servingPod(docs).prewarm.image, "registry.example.com/prewarm:0.2.0");
  const notes = (...sets) => {
    const res = spawnSync(helm, ["install", "prewarm", chart, "--dry-run=client", ...sets.flatMap((s) => ["--set", s])], { encoding: "utf8" });
    assert.equal(res.status, 0, res.stderr);
    return res.stdout.slice(res.stdout.indexOf("NOTES:"));
  };
  assert.match(notes(...image), /WARNING: the prewarmer image is ghcr\.io\/prewarm\/prewarm:0\.1\.0\. Every key in the cache image/);
  assert.doesNotMatch(notes(...image, "prewarm.volume.image.packedBy=ghcr.io/prewarm/prewarm:0.1.0"), /WARNING/);
  assert.doesNotMatch(notes(), /WARNING/, "no image volume, no warning");
});

test("README's CI cache image and its fleet command run the same prewarmer and the same line", () => {
  const readme = readFileSync(path.join(root, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## A cache image built in CI"));
  const block = section.slice(section.indexOf("```sh\n") + 6, section.indexOf("\n```", section.indexOf("```sh\n")));
  const values = block.match(/^cat > dsv32\.yaml <<'EOF'\n([\s\S]*?)\nEOF$/m);
  assert.ok(values, "the block writes dsv32.yaml");
  const tmp = mkdtempSync(path.join(os.tmpdir(), "prewarm-readme-"));
  try {
    writeFileSync(path.join(tmp, "dsv32.yaml"), values[1] + "\n");
    symlinkSync(path.join(root, "charts"), path.join(tmp, "charts"));
    // A command of the block as its words, with $cache and $img as the block sets them.
    const run = (cmd, vars = {}) => {
      const words = shellWords(cmd.replace(/\$(\w+)/g, (m, v) => (v in vars ? vars[v] : m)));
      assert.equal(words[0], "helm");
      return yaml.loadAll(execFileSync(helm, words.slice(1), { cwd: tmp, encoding: "utf8" })).filter(Boolean);
    };
    const ci = block.match(/^pod=\$\((helm template [^)]*)\)$/m);
    assert.ok(ci, "the CI step renders the chart");
    const ciPod = servingPod(run(ci[1]));
    // The block's yq expressions, read by js-yaml here.
    assert.match(block, /img=\$\(yq -r '\.spec\.template\.spec\.initContainers\[0\]\.image'/);
    assert.match(block, /yq -r '\.spec\.template\.spec\.initContainers\[0\]\.env\[\] \| \.name \+ "=" \+ \.value'.*> prewarm\.env/);
    assert.match(block, /docker run --rm --env-file prewarm\.env .*"\$img" run/s);
    const img = ciPod.prewarm.image;
    const cache = block.match(/^cache=(\S+)$/m)[1];
    const fleetCmd = block.match(/^helm upgrade --install (?:.*\\\n)*.*$/m)[0].replace(/\\\n/g, " ")
      .replace("helm upgrade --install", "helm template");
    const fleet = servingPod(run(fleetCmd, { cache, img }));
    assert.notEqual(img, "ghcr.io/prewarm/prewarm:0.1.0", "the block's own prewarm image, not the chart's default");
    assert.equal(fleet.prewarm.image, img, "the fleet's prewarmer is the image that filled and packed the cache");
    assert.equal(env(fleet.prewarm).PREWARM_VLLM_ARGS, env(ciPod.prewarm).PREWARM_VLLM_ARGS, "the same vLLM line");
    assert.equal(env(fleet.prewarm).PREWARM_ARCH, env(ciPod.prewarm).PREWARM_ARCH);
    assert.deepEqual(fleet.prewarm.args, ["verify", "--serve"]);
    // Every line of prewarm.env (docker's --env-file: NAME=VALUE, one a line) stays one line.
    for (const e of ciPod.prewarm.env) assert.ok(!/\n/.test(e.value), e.name);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});

// The prefill Job survives an upgrade that changes its spec; no pod but the server's is the Service's (item 6).
test("the prefill Job's name follows its spec, within 63 characters", () => {
  const job = (...sets) => find(render("prefill.enabled=true", "prewarm.volume.kind=pvc", ...sets), "Job");
  const base = job().metadata.name;
  assert.match(base, /^prewarm-prefill-[0-9a-f]{8}$/);
  assert.equal(job("service.type=NodePort").metadata.name, base, "a change outside the Job keeps it");
  for (const sets of [["limits.maxModelLen=65536"], ["--set-json", 'vllm.extraArgs=["-dcp","2"]'], ["prefill.shards=8"],
    ["prewarm.image.tag=0.2.0"]]) {
    assert.notEqual(job(...sets).metadata.name, base, sets.join(" "));
  }
  // Helm allows 53 characters of release name; the fullname is then 61.
  const args = ["template", "a".repeat(53), chart, "--set", "prefill.enabled=true", "--set", "prewarm.volume.kind=pvc"];
  const long = yaml.loadAll(execFileSync(helm, args, { encoding: "utf8" })).find((d) => d && d.kind === "Job");
  assert.ok(long.metadata.name.length <= 63, long.metadata.name);
  validate(long);
});

test("the prefill and helm-test pods do not carry the Service's selector", () => {
  const docs = render("prefill.enabled=true", "prewarm.volume.kind=pvc");
  const selector = find(docs, "Service").spec.selector;
  const selects = (labels) => Object.entries(selector).every(([k, v]) => (labels || {})[k] === v);
  assert.ok(selects(find(docs, "Deployment").spec.template.metadata.labels), "the server's pods are selected");
  const job = find(docs, "Job");
  assert.ok(!selects(job.spec.template.metadata.labels), JSON.stringify(job.spec.template.metadata.labels));
  assert.equal(job.spec.template.metadata.labels["app.kubernetes.io/component"], "prefill");
  const testPod = docs.find((d) => d.kind === "Pod");
  assert.ok(!selects(testPod.metadata.labels), JSON.stringify(testPod.metadata.labels));
  assert.equal(testPod.metadata.labels["app.kubernetes.io/instance"], "prewarm");
  // The PodMonitor selects as the Service does.
  const pm = find(render("podMonitor.enabled=true", "--api-versions", "monitoring.coreos.com/v1/PodMonitor"), "PodMonitor");
  assert.deepEqual(pm.spec.selector.matchLabels, selector);
});

test("monitors render only when enabled and the API exists", () => {
  const api = ["--api-versions", "monitoring.coreos.com/v1/ServiceMonitor", "--api-versions", "monitoring.coreos.com/v1/PodMonitor"];
  for (const [value, kind] of [["serviceMonitor", "ServiceMonitor"], ["podMonitor", "PodMonitor"]]) {
    assert.equal(find(render(`${value}.enabled=true`), kind), undefined, `no API, no ${kind}`);
    const m = find(render(`${value}.enabled=true`, ...api), kind);
    assert.ok(m, kind);
    validate(m);
  }
  const docs = render(...api);
  for (const k of ["ServiceMonitor", "PodMonitor"]) assert.equal(find(docs, k), undefined, "not enabled");
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

// --- Issue 31 item 4: the values the binary takes, and the standard pod knobs. ---

const schema = JSON.parse(readFileSync(path.join(chart, "values.schema.json"), "utf8"));
// What the binary itself says it takes: its error for a value it does not.
function binaryRejects(...args) {
  const r = spawnSync(prewarmBin, ["plan", "--format", "json", ...args], { env: { PATH: process.env.PATH }, encoding: "utf8" });
  assert.equal(r.status, 2, `prewarm plan ${args.join(" ")} was not refused: ${r.stderr}`);
  return r.stderr;
}
const listAfter = (text, marker) => text.slice(text.indexOf(marker) + marker.length).split("\n")[0]
  .replace(/, or auto\s*$/, "").split(",").map((s) => s.trim()).filter(Boolean);
const rejectedBySchema = (...sets) => {
  const args = ["template", "prewarm", chart];
  for (let i = 0; i < sets.length; ++i) {
    if (sets[i].startsWith("--")) args.push(sets[i], sets[++i]);
    else args.push("--set", sets[i]);
  }
  const r = spawnSync(helm, args, { encoding: "utf8" });
  return r.status !== 0 ? r.stderr : null;
};

test("the schema takes every KV cache dtype the binary takes, and each reaches the plan", () => {
  const binary = listAfter(binaryRejects("--kv-cache-dtype", "int4"), "expected one of vLLM's: ");
  assert.ok(binary.length >= 10, binary.join(","));
  assert.deepEqual(schema.properties.limits.properties.kvCacheDtype.enum.filter((d) => d !== null).sort(), [...binary].sort());
  for (const dtype of binary) {
    const plan = planInPod(servingPod(render(`limits.kvCacheDtype=${dtype}`)).prewarm);
    if (dtype !== "auto") assert.equal(plan.limits.kv_cache_dtype, dtype);
  }
  for (const bad of ["int4", "fp16", "half"]) {
    binaryRejects("--kv-cache-dtype", bad);
    assert.match(rejectedBySchema(`limits.kvCacheDtype=${bad}`) || "", /kvCacheDtype/, bad);
  }
});

test("the schema takes every arch the binary knows, alone or as a list, and refuses what it refuses", () => {
  const known = listAfter(binaryRejects("--arch", "sm_90a"), "known: ");
  assert.ok(known.includes("gfx942") && known.includes("sm_90"), known.join(","));
  for (const arch of [...known, "auto"]) {
    const { prewarm } = servingPod(render(`prewarm.arch=${arch}`));
    assert.equal(env(prewarm).PREWARM_ARCH, arch);
    if (arch !== "auto") assert.deepEqual(planInPod(prewarm).arch, [arch]);
  }
  // A list, as --set writes one and as a values file does: the prewarmer gets it comma-joined.
  for (const sets of [["prewarm.arch={gfx950,gfx942}"], ["--set-json", 'prewarm.arch=["gfx950","gfx942"]']]) {
    const { prewarm } = servingPod(render(...sets));
    assert.equal(env(prewarm).PREWARM_ARCH, "gfx950,gfx942");
    assert.deepEqual(planInPod(prewarm).arch, ["gfx950", "gfx942"]);
  }
  assert.deepEqual(planInPod(servingPod(render("--set-json", `prewarm.arch=${JSON.stringify(known)}`)).prewarm).arch, known);
  // A comma string (a values file's arch: gfx950,gfx942) is the same list.
  assert.equal(env(servingPod(render("--set-json", 'prewarm.arch="gfx950,gfx942"')).prewarm).PREWARM_ARCH, "gfx950,gfx942");
  // What the binary refuses, the schema refuses.
  for (const bad of ["sm_90a", "GFX942", "auto,gfx942", "gfx942,,gfx950", ""]) {
    if (bad) binaryRejects("--arch", bad);
    assert.match(rejectedBySchema("--set-json", `prewarm.arch=${JSON.stringify(bad)}`) || "", /arch/, bad);
  }
  for (const bad of [["auto", "gfx942"], [], ["gfx942", "gfx942"], ["sm_90a"]]) {
    assert.match(rejectedBySchema("--set-json", `prewarm.arch=${JSON.stringify(bad)}`) || "", /arch/, JSON.stringify(bad));
  }
  // --set's own comma splitting cannot take a bare list: Helm fails, it does not drop gfx942.
  assert.notEqual(renderFails("prewarm.arch=gfx950,gfx942").code, 0);
});

test("maxModelLen takes auto, -1 and vLLM's 32K and 25.6k as the binary does; it refuses what the binary refuses", () => {
  const modelMax = planInPod(servingPod(render("--set-json", `vllm.extraArgs=${JSON.stringify(["--max-model-len", "auto"])}`)).prewarm).limits.max_model_len;
  for (const [set, want] of [["limits.maxModelLen=auto", modelMax], ["limits.maxModelLen=-1", modelMax],
    ["limits.maxModelLen=131072", 131072], ["limits.maxModelLen=32K", 32768], ["limits.maxModelLen=128k", 128000],
    ["limits.maxModelLen=25.6k", 25600]]) {
    const { prewarm, vllm } = servingPod(render(set));
    const words = argv(vllm);
    assert.equal(words[words.indexOf("--max-model-len") + 1], set.split("=")[1], "on vLLM's line as given");
    assert.equal(planInPod(prewarm).limits.max_model_len, want, set);
  }
  assert.equal(modelMax, 163840, "the embedded model's maximum");
  for (const bad of ["0", "-2", "1e6", "1.5K", ".5k", "32KB", "auto1"]) {
    binaryRejects("--max-model-len", bad);
    assert.match(rejectedBySchema(`limits.maxModelLen=${bad}`) || "", /maxModelLen/, bad);
  }
});

// Issue 29: a limit the user does not set is not on the line, so vLLM and the prewarmer both take
// vLLM's default (the binary follows vLLM's GPU-class defaults); the chart overrides none of them.
// [value, its flags, the plan's field]
const chartLimits = [["maxNumSeqs", ["--max-num-seqs"], "max_num_seqs"],
  ["maxNumBatchedTokens", ["--max-num-batched-tokens"], "max_num_batched_tokens"],
  ["maxModelLen", ["--max-model-len"], "max_model_len"],
  ["numSpeculativeTokens", ["--speculative-config", "--num-speculative-tokens"], "num_speculative_tokens"],
  ["maxCudagraphCaptureSize", ["--compilation-config"], "max_cudagraph_capture_size"],
  ["tensorParallelSize", ["--tensor-parallel-size", "-tp"], "tensor_parallel_size"],
  ["decodeContextParallelSize", ["--decode-context-parallel-size", "-dcp"], "decode_context_parallel_size"],
  ["blockSize", ["--block-size"], "block_size"],
  ["kvCacheDtype", ["--kv-cache-dtype"], "kv_cache_dtype"]];
// The binary's own plan for a vLLM line with no limit flag at all.
function binaryDefaults(arch) {
  const r = spawnSync(prewarmBin, ["plan", "--format", "json", "--arch", arch, "--vllm-args", "vllm serve deepseek-ai/DeepSeek-V3.2"],
    { env: { PATH: process.env.PATH }, encoding: "utf8", maxBuffer: 1 << 28 });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout).limits;
}

test("by default the chart sets only tp and the KV dtype; the rest are vLLM's GPU-class defaults, as the binary plans them", () => {
  for (const [arch, seqs, tokens] of [["gfx942", 1024, 8192], ["gfx950", 1024, 8192], ["sm_90", 1024, 8192], ["gfx90a", 256, 2048]]) {
    const { prewarm, vllm } = servingPod(render(`prewarm.arch=${arch}`));
    assert.deepEqual(argv(vllm), ["vllm", "serve", "deepseek-ai/DeepSeek-V3.2", "--tensor-parallel-size", "8",
      "--kv-cache-dtype", "nvfp4", "--port", "8000"], arch);
    const { limits } = planInPod(prewarm);
    const defaults = binaryDefaults(arch);
    for (const [, , field] of chartLimits) {
      if (field === "tensor_parallel_size") assert.equal(limits[field], 8);
      else assert.equal(limits[field], defaults[field], `${arch}: ${field} is the binary's default`);
    }
    assert.deepEqual([limits.max_num_seqs, limits.max_num_batched_tokens, limits.max_model_len], [seqs, tokens, 163840], arch);
  }
});

for (const [value, flags, field] of chartLimits) {
  test(`limits.${value} unset (--set null, or null in a values file): no flag on either line, the binary's default planned`, () => {
    const defaults = binaryDefaults("gfx942");
    for (const sets of [[`limits.${value}=null`], ["--set-json", `limits.${value}=null`]]) {
      const docs = render(...sets);
      for (const d of docs) validate(d);
      const { prewarm, vllm } = servingPod(docs);
      for (const [who, w] of [["vllm", argv(vllm)], ["prewarm", shellWords(env(prewarm).PREWARM_VLLM_ARGS)]]) {
        assert.equal(count(w, flags), 0, `${who}: ${JSON.stringify(w)}`);
      }
      const plan = planInPod(prewarm);
      // tp 8 stays for the others; unset, tp is vLLM's 1.
      if (field === "tensor_parallel_size") assert.equal(plan.limits[field], 1);
      else assert.equal(plan.limits[field], defaults[field], sets.join(" "));
    }
  });
}

test("a dcp with tp unset is checked against vLLM's tp 1", () => {
  const err = rejectedBySchema("limits.tensorParallelSize=null", "limits.decodeContextParallelSize=2");
  assert.match(err || "", /decodeContextParallelSize \(2\) must divide limits\.tensorParallelSize \(1, vLLM's default: it is unset\)/);
  binaryRejects("--vllm-args", "vllm serve m -dcp 2");
  const { prewarm } = servingPod(render("limits.tensorParallelSize=null", "limits.decodeContextParallelSize=1"));
  assert.equal(planInPod(prewarm).limits.decode_context_parallel_size, 1);
});

// Each integer limit's bounds, as the binary states them.
const intLimits = { maxNumSeqs: "max-num-seqs", maxNumBatchedTokens: "max-num-batched-tokens",
  numSpeculativeTokens: "num-speculative-tokens", maxCudagraphCaptureSize: "max-cudagraph-capture-size",
  tensorParallelSize: "tensor-parallel-size", decodeContextParallelSize: "decode-context-parallel-size",
  blockSize: "block-size" };
test("each integer limit's bounds are the binary's", () => {
  for (const [value, flag] of Object.entries(intLimits)) {
    const max = Number(binaryRejects(`--${flag}`, "99999999999").match(/must be at most (\d+)/)[1]);
    const min = Number(binaryRejects(`--${flag}`, "-5").match(/must be an integer >= (\d+)/)[1]);
    const p = schema.properties.limits.properties[value];
    assert.deepEqual([p.minimum, p.maximum], [min, max], value);
    assert.match(rejectedBySchema(`limits.${value}=${max + 1}`) || "", new RegExp(value));
    assert.match(rejectedBySchema(`limits.${value}=${min - 1}`) || "", new RegExp(value));
    binaryRejects(`--${flag}`, String(min - 1));
  }
  assert.equal(rejectedBySchema("limits.maxNumSeqs=65536"), null);
});

test("decodeContextParallelSize reaches both containers; one that does not divide tp fails as in the binary", () => {
  for (const [tp, dcp] of [[8, 1], [8, 2], [8, 8], [4, 2], [8, 3], [4, 8], [6, 4]]) {
    const sets = [`limits.tensorParallelSize=${tp}`, `limits.decodeContextParallelSize=${dcp}`];
    const bin = spawnSync(prewarmBin, ["plan", "--format", "json", "--vllm-args", `vllm serve m -tp ${tp} -dcp ${dcp}`],
      { env: { PATH: process.env.PATH }, encoding: "utf8" });
    const err = rejectedBySchema(...sets);
    if (bin.status !== 0) {
      assert.equal(bin.status, 2);
      assert.match(err || "", new RegExp(`decodeContextParallelSize \\(${dcp}\\) must divide limits.tensorParallelSize \\(${tp}\\)`), `tp ${tp} dcp ${dcp}`);
      continue;
    }
    assert.equal(err, null, `tp ${tp} dcp ${dcp}: the binary plans it, the chart must render it`);
    const { prewarm, vllm } = servingPod(render(...sets));
    assert.equal(count(argv(vllm), ["--decode-context-parallel-size", "-dcp"]), 1, "set, so on the line");
    assert.equal(planInPod(prewarm).limits.decode_context_parallel_size, dcp);
  }
  // -dcp in extraArgs is the flag, once; the chart's own value then is not checked or given.
  const { vllm } = servingPod(render("limits.decodeContextParallelSize=2", "--set-json", 'vllm.extraArgs=["-dcp","4"]'));
  assert.equal(count(argv(vllm), ["--decode-context-parallel-size", "-dcp"]), 1);
});

test("a tp that does not divide the model's heads renders; the prewarmer refuses it, naming both", () => {
  const { prewarm } = servingPod(render("limits.tensorParallelSize=3"));
  const r = spawnSync(prewarmBin, ["plan", "--format", "json"], { env: { PATH: process.env.PATH, ...env(prewarm) }, encoding: "utf8" });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--tensor-parallel-size 3: must divide num_attention_heads \(128\)/);
});

test("the schema refuses unknown values at the top and inside each section", () => {
  for (const [set, where] of [["tolerationz[0].key=amd.com/gpu", "'tolerationz'"], ["nodeselector.a=b", "'nodeselector'"],
    ["prewarm.archs=gfx950", "/prewarm': additional properties 'archs'"], ["vllm.extraArg=x", "'extraArg'"],
    ["limits.dcp=2", "'dcp'"], ["serviceMonitor.label.release=x", "'label'"], ["prefill.shard=2", "'shard'"],
    ["serviceAccount.create=yes", "serviceAccount"], ["prewarm.volume.pvc.claim=x", "'claim'"]]) {
    const err = rejectedBySchema(set);
    assert.ok(err, `${set} rendered`);
    assert.ok(err.includes(where), `${set}: ${err}`);
  }
});

test("tolerations, nodeSelector, affinity, priority, pod labels and annotations reach the server's pod", () => {
  const affinity = { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [
    { matchExpressions: [{ key: "gpu-pool", operator: "In", values: ["mi300x", "mi355x"] }] }] } } };
  const docs = render("tolerations[0].key=amd.com/gpu", "tolerations[0].operator=Exists", "tolerations[0].effect=NoSchedule",
    "nodeSelector.gpu-pool=mi300x", "--set-json", `affinity=${JSON.stringify(affinity)}`, "priorityClassName=inference",
    "podLabels.team=ml", "podAnnotations.example\\.com/owner=ml-platform", "prefill.enabled=true", "prewarm.volume.kind=pvc");
  for (const d of docs) validate(d);
  const dep = find(docs, "Deployment");
  const pod = dep.spec.template.spec;
  assert.deepEqual(pod.tolerations, [{ key: "amd.com/gpu", operator: "Exists", effect: "NoSchedule" }]);
  assert.deepEqual(pod.nodeSelector, { "gpu-pool": "mi300x" });
  assert.deepEqual(pod.affinity, affinity);
  assert.equal(pod.priorityClassName, "inference");
  assert.equal(dep.spec.template.metadata.labels.team, "ml");
  assert.deepEqual(dep.spec.template.metadata.annotations, { "example.com/owner": "ml-platform" });
  // Still the Service's pods, and the Deployment's.
  const selector = find(docs, "Service").spec.selector;
  for (const [k, v] of Object.entries(selector)) assert.equal(dep.spec.template.metadata.labels[k], v);
  assert.deepEqual(dep.spec.selector.matchLabels, selector);
  // The prefill pods compile on CPUs: the server's GPU scheduling is not theirs; prefill.* is.
  let job = find(docs, "Job").spec.template.spec;
  for (const k of ["tolerations", "nodeSelector", "affinity", "priorityClassName"]) assert.equal(job[k], undefined, k);
  job = find(render("prefill.enabled=true", "prewarm.volume.kind=pvc", "prefill.nodeSelector.pool=cpu",
    "prefill.tolerations[0].key=batch", "prefill.tolerations[0].operator=Exists"), "Job").spec.template.spec;
  assert.deepEqual(job.nodeSelector, { pool: "cpu" });
  assert.deepEqual(job.tolerations, [{ key: "batch", operator: "Exists" }]);
  // A pod label may not take the selector's keys.
  const r = renderFails("podLabels.app\\.kubernetes\\.io/name=other");
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /podLabels may not set app\.kubernetes\.io\/name/);
  // Nothing set: none of them (and no empty keys).
  const plain = find(render(), "Deployment").spec.template;
  for (const k of ["tolerations", "nodeSelector", "affinity", "priorityClassName"]) assert.equal(plain.spec[k], undefined, k);
  assert.equal(plain.metadata.annotations, undefined);
});

test("imagePullSecrets and the service account reach every pod of the chart", () => {
  const docs = render("imagePullSecrets[0].name=regcred", "serviceAccount.create=true",
    "serviceAccount.annotations.iam\\.example\\.com/role=prewarm", "prefill.enabled=true", "prewarm.volume.kind=pvc");
  for (const d of docs) validate(d);
  const sa = find(docs, "ServiceAccount");
  assert.equal(sa.metadata.name, "prewarm");
  assert.deepEqual(sa.metadata.annotations, { "iam.example.com/role": "prewarm" });
  assert.equal(sa.automountServiceAccountToken, false);
  const pods = [find(docs, "Deployment").spec.template.spec, find(docs, "Job").spec.template.spec, find(docs, "Pod").spec];
  for (const pod of pods) {
    assert.deepEqual(pod.imagePullSecrets, [{ name: "regcred" }]);
    assert.equal(pod.serviceAccountName, "prewarm");
    assert.equal(pod.automountServiceAccountToken, false, "neither container calls the API");
  }
  // An existing account, by name; none made.
  const other = render("serviceAccount.name=inference", "serviceAccount.automountToken=true");
  assert.equal(find(other, "ServiceAccount"), undefined);
  const pod = find(other, "Deployment").spec.template.spec;
  assert.equal(pod.serviceAccountName, "inference");
  assert.equal(pod.automountServiceAccountToken, true);
  assert.equal(pod.imagePullSecrets, undefined);
});

test("/dev/shm, the weights and the Hugging Face cache are the server's volumes", () => {
  let pod = find(render(), "Deployment").spec.template.spec;
  let vllm = pod.containers[0];
  assert.deepEqual(pod.volumes.find((v) => v.name === "dshm"), { name: "dshm", emptyDir: { medium: "Memory", sizeLimit: "16Gi" } });
  assert.ok(vllm.volumeMounts.some((m) => m.name === "dshm" && m.mountPath === "/dev/shm"));
  assert.ok(!pod.initContainers[0].volumeMounts.some((m) => m.name === "dshm"), "the prewarmer needs no shared memory");
  const docs = render("vllm.shm.enabled=false", "vllm.weights.volume.persistentVolumeClaim.claimName=dsv32-weights",
    "vllm.weights.volume.persistentVolumeClaim.readOnly=true", "vllm.model=/models/DeepSeek-V3.2",
    "--set-json", 'vllm.hfCache.volume={"hostPath":{"path":"/var/cache/hf","type":"DirectoryOrCreate"}}');
  for (const d of docs) validate(d);
  pod = find(docs, "Deployment").spec.template.spec;
  vllm = pod.containers[0];
  assert.equal(pod.volumes.find((v) => v.name === "dshm"), undefined);
  assert.deepEqual(pod.volumes.find((v) => v.name === "weights"),
    { name: "weights", persistentVolumeClaim: { claimName: "dsv32-weights", readOnly: true } });
  assert.deepEqual(vllm.volumeMounts.find((m) => m.name === "weights"), { name: "weights", mountPath: "/models", readOnly: true });
  assert.deepEqual(pod.volumes.find((v) => v.name === "hf-cache"),
    { name: "hf-cache", hostPath: { path: "/var/cache/hf", type: "DirectoryOrCreate" } });
  assert.deepEqual(vllm.volumeMounts.find((m) => m.name === "hf-cache"), { name: "hf-cache", mountPath: "/hf-cache" });
  assert.equal(env(vllm).HF_HOME, "/hf-cache");
  assert.deepEqual(argv(vllm).slice(0, 3), ["vllm", "serve", "/models/DeepSeek-V3.2"]);
  // Two sources in one volume is not a volume.
  assert.match(rejectedBySchema("--set-json", 'vllm.weights.volume={"hostPath":{"path":"/m"},"emptyDir":{}}') || "", /weights/);
});

// --- Item 5: the Prometheus Operator and Grafana. ---

// NOTES as Helm renders them, for the API versions given (helm install has no --api-versions): a
// copy of the chart with one more template that includes NOTES.txt.
function notesWith(apis, ...sets) {
  const tmp = mkdtempSync(path.join(os.tmpdir(), "prewarm-notes-"));
  try {
    cpSync(chart, path.join(tmp, "prewarm"), { recursive: true });
    writeFileSync(path.join(tmp, "prewarm/templates/zz-notes.yaml"),
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: {{ include "prewarm/templates/NOTES.txt" . | quote }}\n');
    const args = ["template", "prewarm", path.join(tmp, "prewarm"), "--show-only", "templates/zz-notes.yaml"];
    for (const a of apis) args.push("--api-versions", a);
    for (const s of sets) args.push("--set", s);
    return yaml.load(execFileSync(helm, args, { encoding: "utf8" })).data.notes;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

test("monitors: labels for the operator's selector, one at a time, and NOTES say when the API is absent", () => {
  const api = ["--api-versions", "monitoring.coreos.com/v1/ServiceMonitor", "--api-versions", "monitoring.coreos.com/v1/PodMonitor"];
  const sm = find(render("serviceMonitor.enabled=true", "serviceMonitor.labels.release=kube-prometheus-stack", ...api), "ServiceMonitor");
  assert.equal(sm.metadata.labels.release, "kube-prometheus-stack");
  assert.equal(sm.metadata.labels["app.kubernetes.io/name"], "prewarm");
  const pm = find(render("podMonitor.enabled=true", "podMonitor.labels.release=kps", ...api), "PodMonitor");
  assert.equal(pm.metadata.labels.release, "kps");
  // Both would scrape the server's pods twice.
  let r = renderFails("serviceMonitor.enabled=true", "podMonitor.enabled=true");
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /choose one/);
  r = renderFails("serviceMonitor.enabled=true", "service.enabled=false");
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /serviceMonitor.enabled needs service.enabled/);
  // Enabled without the operator: no object, and NOTES say so; with it, no warning.
  for (const [value, kind] of [["serviceMonitor", "ServiceMonitor"], ["podMonitor", "PodMonitor"]]) {
    assert.equal(find(render(`${value}.enabled=true`), kind), undefined);
    assert.match(notesWith([], `${value}.enabled=true`), new RegExp(`WARNING: ${value}\\.enabled, but this cluster has no\\nmonitoring\\.coreos\\.com/v1 ${kind}`));
    assert.doesNotMatch(notesWith([`monitoring.coreos.com/v1/${kind}`], `${value}.enabled=true`), /WARNING/);
  }
  assert.doesNotMatch(notesWith([]), /WARNING/, "no monitor, no warning");
  assert.match(notesWith(["monitoring.coreos.com/v1/PodMonitor"], "podMonitor.enabled=true", "prewarm.mode=init"),
    /WARNING: podMonitor\.enabled in init mode.*\n.*Set prewarm\.pushgateway/);
});

test("the dashboard's ConfigMap goes to the namespace and folder Grafana's sidecar reads", () => {
  let cm = find(render("dashboard.namespace=monitoring", "dashboard.folder=Inference"), "ConfigMap");
  assert.equal(cm.metadata.namespace, "monitoring");
  assert.deepEqual(cm.metadata.annotations, { grafana_folder: "Inference" });
  cm = find(render("dashboard.folder=Inference", "dashboard.folderAnnotation=k8s-sidecar-target-directory"), "ConfigMap");
  assert.deepEqual(cm.metadata.annotations, { "k8s-sidecar-target-directory": "Inference" });
  cm = find(render(), "ConfigMap");
  assert.equal(cm.metadata.namespace, undefined, "the release's namespace");
  assert.equal(cm.metadata.annotations, undefined);
});

test("every panel's every series is filtered by $namespace", () => {
  const dash = JSON.parse(readFileSync(path.join(root, "dashboards/prewarm-startup.json"), "utf8"));
  let selectors = 0;
  for (const panel of dash.panels) {
    for (const { expr } of panel.targets) {
      for (const m of expr.matchAll(/\b((?:prewarm|kube)_[a-z_]+)(\{[^}]*\})?/g)) {
        ++selectors;
        assert.ok((m[2] || "").includes('namespace=~"$namespace"'), `${panel.title}: ${m[0]} in ${expr}`);
      }
    }
  }
  assert.ok(selectors >= 18, `${selectors} selectors`);
  const ns = dash.templating.list.find((v) => v.name === "namespace");
  assert.equal(ns.query.query, "label_values(prewarm_build_info, namespace)", "the namespaces that run a prewarmer");
  assert.equal(ns.allValue, ".*");
});

// --- Item 7: each pod's Pushgateway group. ---

// The container's environment as the kubelet makes it: fieldRefs from the pod, then $(VAR)
// expanded from the variables before it ($$ keeps a literal $).
function kubeletEnv(container, pod) {
  const out = {};
  for (const e of container.env) {
    if (e.valueFrom) {
      out[e.name] = { "metadata.name": pod.name, "metadata.namespace": pod.namespace }[e.valueFrom.fieldRef.fieldPath];
      assert.ok(out[e.name] !== undefined, JSON.stringify(e));
      continue;
    }
    out[e.name] = e.value.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, v) => (m === "$$" ? "$" : v in out ? out[v] : m));
  }
  return out;
}

test("with a Pushgateway, every pod pushes to a group of its own (a real Pushgateway, the real binary)", async () => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), "prewarm-push-"));
  // A free loopback port: bound by the kernel's choice, then released for the Pushgateway.
  const port = await new Promise((res) => {
    const srv = net.createServer().listen(0, "127.0.0.1", () => {
      const { port: p } = srv.address();
      srv.close(() => res(p));
    });
  });
  const gw = spawn("prometheus-pushgateway", [`--web.listen-address=127.0.0.1:${port}`, `--persistence.file=${tmp}/pg.data`], { stdio: "ignore" });
  try {
    const base = `http://127.0.0.1:${port}`;
    let up = false;
    for (let i = 0; i < 50 && !up; ++i) {
      up = await fetch(`${base}/-/ready`).then((r) => r.ok, () => false);
      if (!up) await new Promise((res) => setTimeout(res, 100));
    }
    assert.ok(up, "the Pushgateway did not start");
    const docs = render("prewarm.mode=init", `prewarm.pushgateway=${base}`, "prewarm.arch=gfx90a", "limits.kvCacheDtype=fp8",
      "limits.maxNumSeqs=1", "limits.tensorParallelSize=1", "prefill.enabled=true", "prewarm.volume.kind=pvc");
    const { prewarm } = servingPod(docs);
    const job = find(docs, "Job").spec.template.spec.containers[0];
    for (const c of [prewarm, job]) {
      const names = c.env.map((e) => e.name);
      assert.ok(names.indexOf("POD_NAME") < names.indexOf("PREWARM_PUSHGATEWAY_GROUP"), "defined before it is used");
      assert.equal(env(c).PREWARM_PUSHGATEWAY_GROUP, "namespace=$(POD_NAMESPACE),pod=$(POD_NAME)");
    }
    // Two init pods of one Deployment, one after the other on the same cache.
    for (const name of ["prewarm-7d9f8b-x2k4q", "prewarm-7d9f8b-p8m3z"]) {
      const e = { PATH: process.env.PATH, ...kubeletEnv(prewarm, { name, namespace: "inference" }) };
      delete e.PREWARM_MODEL_CONFIG;
      const r = spawnSync(prewarmBin, ["run", "--cache-dir", `${tmp}/cache`, "--metrics-address", "127.0.0.1:0",
        "--grpc-address", "127.0.0.1:0"], { env: e, encoding: "utf8" });
      assert.equal(r.status, 0, r.stderr);
      assert.doesNotMatch(r.stderr, /Pushgateway/, r.stderr);
    }
    const groups = (await (await fetch(`${base}/api/v1/metrics`)).json()).data.map((g) => g.labels);
    assert.deepEqual(groups.map((g) => JSON.stringify(g)).sort(), [
      { job: "prewarm", namespace: "inference", pod: "prewarm-7d9f8b-p8m3z" },
      { job: "prewarm", namespace: "inference", pod: "prewarm-7d9f8b-x2k4q" }].map((g) => JSON.stringify(g)));
    // Without the chart's grouping both would have been one group, the second replacing the first.
    const text = await (await fetch(`${base}/metrics`)).text();
    assert.match(text, /prewarm_ready\{instance="",job="prewarm",namespace="inference",pod="prewarm-7d9f8b-x2k4q"\} 1/);
  } finally {
    if (gw.exitCode === null && gw.signalCode === null) {
      const exited = new Promise((res) => gw.once("exit", res));
      gw.kill("SIGTERM");
      await exited;
    }
    rmSync(tmp, { recursive: true, force: true });
  }
});

test("without a Pushgateway no pod-name variables are set", () => {
  const names = servingPod(render()).prewarm.env.map((e) => e.name);
  for (const n of ["POD_NAME", "POD_NAMESPACE", "PREWARM_PUSHGATEWAY_GROUP"]) assert.ok(!names.includes(n), n);
});

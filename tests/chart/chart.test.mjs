// The Helm chart, rendered by the real Helm 4 and validated against the Kubernetes schemas
// (kubernetes-models), plus the k8s/ overlays and the dashboard kept in step with it.
// Run: node --test tests/chart/chart.test.mjs (scripts/test does, through CTest).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
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
  const r = spawnSync(prewarmBin, ["plan", "--format", "json"], { env: e, encoding: "utf8" });
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
  [["-O3"], ["--compilation-config"], (p) => p.limits.max_cudagraph_capture_size === 512],
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
  assert.match(notes, /--kv-cache-dtype nvfp4 --compilation-config '\{"max_cudagraph_capture_size":512\}' --port 8000 -dcp 2\n/);
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

"""MiniMax-M3's msa_* launchers (docs/kernels.md; prewarm_runtime.h) as Runtime methods, a mixin
beside the MLA launchers of __init__.py. Each checks its tensors as those do (type, dtype, shape,
contiguity, then device; the error names the argument), picks its kernel from its key-deciding
host values and launches on torch.cuda.current_stream(), allocating nothing.

Per rank: Hq query heads, Hkv KV heads, Hi = Hkv index heads, D = Di = 128, Kb blocks a row
selects (info["shape"]: heads_per_rank, kv_heads_per_rank, index_heads_per_rank, head_dim,
index_dim, sparse_topk_blocks). Caches (kernels/nvfp4_msa/msa_layout.h): kv_cache uint8
[blocks, 2, Hkv, 128, D/2 + D/16] (K then V, NVFP4 with global scales k_scale, v_scale),
index_cache bf16 [blocks, 128, Di]; block_table int32 [requests, max_blocks]. The rows of a call
are query tokens: row_req int32 [rows] (each row's block_table row), visible int32 [rows] (its
position + 1, the keys it sees), nb = ceil(visible / 128) its blocks.
"""

from . import _lib

BLOCK = 128  # tokens of a KV page and of a sparse block (--block-size 128)


def _torch():
    import torch  # only launches need it

    return torch


class MsaLaunchers:
    """Mixed into Runtime: needs its info, _checker, _launch and workspace."""

    def _msa_shape(self):
        s = self.info["shape"]
        return (s["heads_per_rank"], s["kv_heads_per_rank"], s["index_heads_per_rank"],
                s["head_dim"], s["index_dim"], s["sparse_topk_blocks"])

    def _msa_kv(self, c, kv_cache):
        _, hkv, _, d, _, _ = self._msa_shape()
        return c("kv_cache", kv_cache, (_torch().uint8,), (None, 2, hkv, BLOCK, d // 2 + d // 16))

    def _msa_index_cache(self, c, index_cache, blocks=None):
        di = self._msa_shape()[4]
        return c("index_cache", index_cache, (_torch().bfloat16,), (blocks, BLOCK, di))

    def msa_norm_rope_insert(self, q, k, v, index_q, index_k, q_norm, k_norm, index_q_norm,
                             index_k_norm, pos, slot, q_out, index_q_out, kv_cache, index_cache,
                             *, k_scale, v_scale, eps=1e-6, theta=5e6):
        """Per new token: Gemma RMSNorm per head (x * rsqrt(mean(x^2) + eps) * (1 + w)), then NeoX
        RoPE (base theta) of the first 64 dims at pos, of q, k, index_q and index_k; K and V
        quantized to NVFP4 (k_scale, v_scale) and index_k as bf16 written at slot (-1: not
        written); q_out and index_q_out the normed, rotated q and index_q. q bf16 [T, Hq, D];
        k, v bf16 [T, Hkv, D]; index_q bf16 [T, Hi, Di]; index_k bf16 [T, Di]; q_norm, k_norm
        float32 [D]; index_q_norm, index_k_norm float32 [Di]; pos int32 [T]; slot int64 [T];
        q_out like q; index_q_out like index_q; kv_cache, index_cache (same block count)."""
        torch = _torch()
        n = "msa_norm_rope_insert"
        c = self._checker(n)
        hq, hkv, hi, d, di, _ = self._msa_shape()
        bf16, f32 = (torch.bfloat16,), (torch.float32,)
        pq = c("q", q, bf16, (None, hq, d))
        t = q.shape[0]
        args = _lib.MsaNormRopeInsertArgs(
            pq, c("k", k, bf16, (t, hkv, d)), c("v", v, bf16, (t, hkv, d)),
            c("index_q", index_q, bf16, (t, hi, di)), c("index_k", index_k, bf16, (t, di)),
            c("q_norm", q_norm, f32, (d,)), c("k_norm", k_norm, f32, (d,)),
            c("index_q_norm", index_q_norm, f32, (di,)),
            c("index_k_norm", index_k_norm, f32, (di,)), c("pos", pos, (torch.int32,), (t,)),
            c("slot", slot, (torch.int64,), (t,)), eps, theta, k_scale,
            v_scale, t, c("q_out", q_out, bf16, (t, hq, d)),
            c("index_q_out", index_q_out, bf16, (t, hi, di)), self._msa_kv(c, kv_cache),
            self._msa_index_cache(c, index_cache, kv_cache.shape[0]), where=n)
        self._launch(n, args, c)

    def _msa_index_args(self, n, c, index_q, row_req, visible, block_table, index_cache,
                        scores, prefill_work):
        torch = _torch()
        _, _, hi, _, di, _ = self._msa_shape()
        i32 = (torch.int32,)
        pq = c("index_q", index_q, (torch.bfloat16,), (None, hi, di))
        rows = index_q.shape[0]
        return _lib.MsaIndexArgs(
            pq, c("row_req", row_req, i32, (rows,)), c("visible", visible, i32, (rows,)),
            c("block_table", block_table, i32, (None, None)), block_table.shape[1],
            self._msa_index_cache(c, index_cache),
            c("scores", scores, (torch.float32,), (hi, rows, None)), scores.shape[2], rows,
            prefill_work, where=n)

    def _msa_index(self, n, index_q, row_req, visible, block_table, index_cache, scores,
                   prefill_work):
        c = self._checker(n)
        self._launch(n, self._msa_index_args(n, c, index_q, row_req, visible, block_table,
                                             index_cache, scores, prefill_work), c)

    def msa_index_prefill(self, index_q, row_req, visible, block_table, index_cache, scores, *,
                          prefill_work):
        """Block scores: scores[h][t][b] = max over the keys j < visible[t] of block b of
        index_q[t][h] . index_k[j] for b < nb(t), -inf up to stride. index_q bf16 [rows, Hi, Di]
        (msa_norm_rope_insert's index_q_out); scores float32 [Hi, rows, stride], stride >= the
        largest nb. prefill_work: the sum over the step's prefill requests of q_len * ctx (it
        picks the kernel)."""
        self._msa_index("msa_index_prefill", index_q, row_req, visible, block_table, index_cache,
                        scores, prefill_work)

    def msa_index_decode(self, index_q, row_req, visible, block_table, index_cache, scores):
        """msa_index_prefill's block scores for decode rows (their count picks the kernel)."""
        self._msa_index("msa_index_decode", index_q, row_req, visible, block_table, index_cache,
                        scores, 0)

    def msa_index_topk_decode(self, index_q, row_req, visible, block_table, index_cache, scores,
                              topk, *, workspace):
        """msa_index_decode and msa_topk_decode in one launch (msa_index_decode's kernel): the
        scores as msa_index_decode writes them and topk int32 [Hi, rows, Kb] as msa_topk_decode
        selects from them. workspace: uint8 or int32, 1-D, at least
        workspace("msa_index_decode", rows)[0] bytes (a counter a row), zero before its first
        use (torch.zeros); every launch leaves it zero, so one allocation for the most rows
        serves every later step on its stream, and a CUDA graph."""
        torch = _torch()
        n = "msa_index_topk_decode"
        c = self._checker(n, kernel="msa_index_decode")
        _, _, hi, _, _, kb = self._msa_shape()
        args = self._msa_index_args(n, c, index_q, row_req, visible, block_table, index_cache,
                                    scores, 0)
        rows = index_q.shape[0]
        ptk = c("topk", topk, (torch.int32,), (hi, rows, kb))
        pws = c.workspace("workspace", workspace, self.workspace("msa_index_decode", rows)[0],
                          (torch.uint8, torch.int32), required=True)
        self._launch(n, args, c, (ptk, pws))

    def _msa_topk(self, n, scores, visible, topk, ctx, workspace):
        torch = _torch()
        c = self._checker(n)
        _, _, hi, _, _, kb = self._msa_shape()
        i32 = (torch.int32,)
        ps = c("scores", scores, (torch.float32,), (hi, None, None))
        rows, stride = scores.shape[1], scores.shape[2]
        need = self.workspace(n, rows, ctx)[0] if n == "msa_topk_prefill" else 0
        args = _lib.MsaTopkArgs(ps, c("visible", visible, i32, (rows,)), stride, rows,
                                c("topk", topk, i32, (hi, rows, kb)),
                                c.workspace("workspace", workspace, need), ctx, where=n)
        self._launch(n, args, c)

    def msa_topk_prefill(self, scores, visible, topk, *, ctx, workspace=None):
        """Per row and index head, the Kb blocks with the highest score among its nb: the leading
        (init) and trailing (local: its own) blocks always, ties to the lower block id, in
        ascending order, -1 padded. scores float32 [Hi, rows, stride]; visible int32 [rows];
        topk int32 [Hi, rows, Kb]. ctx: the request's context (one call per prefill request; it
        picks the kernel); workspace (uint8) when workspace("msa_topk_prefill", rows, ctx)
        asks for one."""
        self._msa_topk("msa_topk_prefill", scores, visible, topk, ctx, workspace)

    def msa_topk_decode(self, scores, visible, topk):
        """msa_topk_prefill for decode rows."""
        self._msa_topk("msa_topk_decode", scores, visible, topk, 0, None)

    def _msa_sparse(self, n, q, topk, row_req, visible, block_table, kv_cache, o, lse, k_scale,
                    v_scale, scale, ctx, ws_o, ws_lse):
        torch = _torch()
        c = self._checker(n)
        hq, hkv, _, d, _, kb = self._msa_shape()
        bf16, i32 = (torch.bfloat16,), (torch.int32,)
        pq = c("q", q, bf16, (None, hq, d))
        rows = q.shape[0]
        ptk = c("topk", topk, i32, (hkv, rows, kb))
        preq = c("row_req", row_req, i32, (rows,))
        pvis = c("visible", visible, i32, (rows,))
        pt = c("block_table", block_table, i32, (None, None))
        pkv = self._msa_kv(c, kv_cache)
        po = c("o", o, bf16, (rows, hq, d))
        pl = c("lse", lse, (torch.float32,), (rows, hq))
        need = self.workspace(n, rows) if n == "msa_sparse_decode" else (0, 0)
        args = _lib.MsaSparseArgs(pq, ptk, preq, pvis, pt, block_table.shape[1], pkv,
                                  k_scale, v_scale, scale, po, pl, rows,
                                  c.workspace("ws_o", ws_o, need[0]),
                                  c.workspace("ws_lse", ws_lse, need[1]), ctx, where=n)
        self._launch(n, args, c)

    def msa_sparse_prefill(self, q, topk, row_req, visible, block_table, kv_cache, o, lse, *,
                           k_scale, v_scale, scale, ctx):
        """GQA over the selected blocks: query head h of row t (KV head g = h / (Hq / Hkv))
        attends over the keys j < visible[t] of the blocks topk[g][t] (-1 skipped): o =
        softmax(scale q . k) v, lse = ln sum exp(scale q . k). q bf16 [rows, Hq, D]
        (msa_norm_rope_insert's q_out); topk int32 [Hkv, rows, Kb]; o bf16 [rows, Hq, D]; lse
        float32 [rows, Hq]; scale: the softmax scale (1/sqrt(D)). ctx: the request's context
        (one call per prefill request; it picks the kernel)."""
        self._msa_sparse("msa_sparse_prefill", q, topk, row_req, visible, block_table, kv_cache,
                         o, lse, k_scale, v_scale, scale, ctx, None, None)

    def msa_sparse_decode(self, q, topk, row_req, visible, block_table, kv_cache, o, lse, *,
                          k_scale, v_scale, scale, ws_o=None, ws_lse=None):
        """msa_sparse_prefill for decode rows, split over the selected blocks: ws_o and ws_lse
        (uint8) when workspace("msa_sparse_decode", rows) asks for them."""
        self._msa_sparse("msa_sparse_decode", q, topk, row_req, visible, block_table, kv_cache,
                         o, lse, k_scale, v_scale, scale, 0, ws_o, ws_lse)

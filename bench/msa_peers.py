#!/usr/bin/env python3
"""PyTorch peers of the MSA launchers (MiniMax-M3, docs/kernels.md), timed on the GPU.

What a PyTorch user would run instead of our msa_* kernels, with a bf16 KV cache (the peers have
no NVFP4), at MiniMax-M3's shape per rank: --tp 4 (default: 16 query heads, 1 KV head, 1 index
head) or --tp 1 (64, 4, 4); head_dim 128, index dim 128, sparse block 128 tokens, top-16 blocks,
the query's own block always selected.

  sparse_prefill   FlexAttention (torch.compile'd) with a BlockMask allowing, per 128-query block
                   and KV head, exactly its 16 selected 128-key blocks (the 15 others as full
                   blocks, the own block as a partial block, causal); enable_gqa. An 8192-token
                   chunk at 8K context (the whole prompt) and at 32K (the last 8192 tokens).
                   K/V are contiguous [1, Hkv, ctx, 128] (flex reads no paged cache).
  sparse_decode    gather + SDPA: per decode row (own 8K context), the 16 selected blocks' K and
                   V gathered from the paged bf16 cache [num_blocks][128][Hkv][128] through the
                   block table, then F.scaled_dot_product_attention with the own block's tail
                   masked. `gqa`: q [R, Hq, 1, 128] with enable_gqa=True; `fold`: the group's 16
                   query heads folded into the query length (q [R, Hkv, 16, 128], no GQA flag).
  index_decode     scores = index_q . index_k over every visible key, block max (amax over a
                   reshape), the own block's tail masked, torch.topk(16) over the blocks with the
                   own block forced. `paged`: index_k gathered from the paged bf16 cache
                   [num_blocks][128][128] through the block table; `contig`: index_k contiguous
                   per request [R, ctx, 128]. 16 rows at 8K and 128K.
  index_prefill    the same for an 8192-token chunk at 8K (8192 x 8192 scores per index head),
                   index_k gathered from the paged cache.
  norm_rope_insert per-head Gemma RMSNorm of q, k, index q, index k; NeoX RoPE on the first 64
                   dims (theta 5e6, cos/sin cache indexed by position); k, v and index k written
                   into the paged bf16 caches at their slots (slot -1: a scratch slot). 16 and
                   8192 tokens.

Timing as bench/kernel_bench.cc: one launch checked, warm-up, then for each of N launches the L2
flushed (a 256 MB buffer written) and CUDA events around the launch; median, p10, p90 in us.
These plain launches include the host's launch gaps as the events see them (eager peers of many
small ops are host-bound); the graph columns time, the same way, replays of a CUDA graph of one
launch: the device time, comparable with kernel_bench's single-kernel rows. Each case draws fresh
random inputs (--seed to repeat). Correctness: first every peer, eager, at a small size against
a dense float64 reference of docs/kernels.md's MSA; then each timed peer's output at the timed size against the
same reference (sampled rows where the dense reference is large): column `check`.
Nothing is asserted: a bad check prints BAD and the timing goes on. (The small check of eager
flex uses a mask_mod that holds the whole selection, since eager flex applies mask_mod alone;
the timed, compiled flex uses a causal-only mask_mod, exact there: see make_block_mask.)

  python3 bench/msa_peers.py [--tp 4|1] [--reps N] [--only NAME,...] [--cpu-smoke]
                             [--seed S] [--time-limit-s T]
NAME: a case (sparse_prefill, sparse_decode, index_decode, index_prefill, norm_rope_insert) or
a word of a peer's name (flex, sdpa, gqa, fold, paged, contig, eager, compiled).
--cpu-smoke: tiny sizes, eager only, on the CPU (any torch >= 1.13; missing SDPA / flex are
emulated densely): it checks the code paths, it times nothing worth reading.
"""
import argparse
import math
import os
import sys
import time
import warnings

import torch
import torch.nn.functional as F

BS = 128      # sparse block = KV page, tokens
TOPK = 16     # selected blocks per query and KV head
D = 128       # head_dim
DI = 128      # index dim
ROT = 64      # rotary dims (NeoX)
THETA = 5e6
EPS = 1e-6
NEG = float("-inf")

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")
try:
    from torch.nn.attention.flex_attention import BlockMask, flex_attention
    HAS_FLEX = True
except ImportError:  # torch < 2.5
    HAS_FLEX = False
HAS_COMPILE = hasattr(torch, "compile")


# ----------------------------------------------------------------------------------------------
# Shapes

class Heads:
    def __init__(self, tp):
        assert 64 % tp == 0
        self.tp = tp
        self.hq = 64 // tp
        self.hkv = max(1, 4 // tp)
        self.hi = self.hkv
        self.group = self.hq // self.hkv

    def __str__(self):
        return "Hq=%d Hkv=%d Hi=%d" % (self.hq, self.hkv, self.hi)


def bf16_randn(shape, dev, scale=1.0):
    return (torch.randn(shape, device=dev) * scale).to(torch.bfloat16)


def random_selection(G, own, nkb, dev):
    """Per KV head g and row r: TOPK random blocks among 0..own[r], always own[r]; every visible
    block when fewer than TOPK are visible. Ascending, -1 padded: int64 [G, n, TOPK]."""
    n = own.numel()
    r = torch.rand(G, n, nkb, device=dev)
    kb = torch.arange(nkb, device=dev)
    r = r.masked_fill(kb > own[:, None], NEG)
    r = torch.where(kb == own[:, None], torch.full_like(r, 2.0), r)
    k = min(TOPK, nkb)
    val, idx = r.topk(k, dim=-1)
    idx = torch.where(val == NEG, torch.full_like(idx, -1), idx)
    if k < TOPK:
        idx = torch.cat([idx, idx.new_full((G, n, TOPK - k), -1)], -1)
    big = nkb + 1
    idx = torch.where(idx < 0, torch.full_like(idx, big), idx).sort(-1).values
    return torch.where(idx == big, torch.full_like(idx, -1), idx)


def allowed_tokens(sel, nkb):
    """sel [G, n, TOPK] (-1 padded) -> bool [G, n, nkb * BS]: the keys of the selected blocks."""
    G, n, _ = sel.shape
    blk = torch.zeros(G, n, nkb + 1, dtype=torch.bool, device=sel.device)
    blk.scatter_(2, torch.where(sel < 0, torch.full_like(sel, nkb), sel), True)
    return blk[:, :, :nkb].repeat_interleave(BS, dim=2)


# ----------------------------------------------------------------------------------------------
# Peer 1: sparse prefill, FlexAttention with a block mask of the selection

def flex_mask_parts(sel, own, nkb, heads):
    """BlockMask tensors for sel [G, nqb, TOPK]: the own block a partial block (mask_mod: causal),
    the others full blocks; int32 [1, H, nqb(, nkb)] with H 1 (one KV head) or Hq."""
    G, nqb, _ = sel.shape
    is_own = sel == own[None, :, None]
    full = (sel >= 0) & ~is_own
    big = nkb + 1
    key = torch.where(full, sel, torch.full_like(sel, big)).sort(-1).values
    width = min(TOPK, nkb)
    full_idx = torch.zeros(G, nqb, nkb, dtype=torch.int64, device=sel.device)
    full_idx[:, :, :width] = torch.where(key == big, torch.zeros_like(key), key)[:, :, :width]
    full_num = full.sum(-1)
    part_idx = torch.zeros(G, nqb, nkb, dtype=torch.int64, device=sel.device)
    part_idx[:, :, 0] = own
    part_num = torch.ones(G, nqb, dtype=torch.int64, device=sel.device)

    def per_head(t):  # [G, ...] -> [1, H, ...]
        if G > 1:
            t = t.repeat_interleave(heads.group, dim=0)
        return t.unsqueeze(0).to(torch.int32).contiguous()

    return [per_head(t) for t in (part_num, part_idx, full_num, full_idx)]


def selection_mask_mod(sel, nkb, off, group):
    """A mask_mod that says the whole mask (the selected blocks, causal): flex's eager (math)
    path applies only mask_mod, to every (q, kv) pair, and ignores the block sparsity."""
    G, nqb, _ = sel.shape
    table = torch.zeros(G, nqb, nkb + 1, dtype=torch.bool, device=sel.device)
    table.scatter_(2, torch.where(sel < 0, torch.full_like(sel, nkb), sel), True)
    table = table[:, :, :nkb].contiguous()

    def exact(b, h, q_idx, kv_idx):
        return table[h // group, q_idx // BS, kv_idx // BS] & (q_idx + off >= kv_idx)

    return exact


def make_block_mask(parts, q_len, kv_len, off, mask_mod=None):
    """The timed peer's BlockMask: mask_mod only causal, which is exact for the compiled kernel
    (it visits only the listed blocks and applies mask_mod to the partial one, the own block)."""
    part_num, part_idx, full_num, full_idx = parts

    def causal(b, h, q_idx, kv_idx):
        return q_idx + off >= kv_idx

    return BlockMask.from_kv_blocks(part_num, part_idx, full_num, full_idx, BLOCK_SIZE=BS,
                                    mask_mod=mask_mod or causal, seq_lengths=(q_len, kv_len))


def dense_from_parts(parts, q_len, kv_len, off):
    """What flex makes of the BlockMask tensors, densely (the CPU smoke's stand-in for flex):
    bool [H, q_len, kv_len]."""
    part_num, part_idx, full_num, full_idx = [t[0].long() for t in parts]
    H, nqb, nkb = part_idx.shape
    col = torch.arange(nkb, device=part_idx.device)

    def dense(num, idx):
        m = torch.zeros(H, nqb, nkb + 1, dtype=torch.bool, device=idx.device)
        m.scatter_(2, torch.where(col < num[..., None], idx, torch.full_like(idx, nkb)), True)
        return m[:, :, :nkb].repeat_interleave(BS, 1).repeat_interleave(BS, 2)

    qi = torch.arange(q_len, device=part_idx.device)[:, None]
    kj = torch.arange(kv_len, device=part_idx.device)[None, :]
    return dense(full_num, full_idx) | (dense(part_num, part_idx) & (qi + off >= kj))


def masked_attention(q, k, v, mask, group):
    """Dense attention with bool mask, fp32 math, output q's dtype. q [..., Hq, Lq, D],
    k/v [..., Hkv, Lk, D], mask broadcastable to [..., Hq, Lq, Lk]."""
    if group > 1:
        k = k.repeat_interleave(group, dim=-3)
        v = v.repeat_interleave(group, dim=-3)
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~mask, NEG)
    return torch.matmul(torch.softmax(s, -1), v.float()).to(q.dtype)


def sdpa(q, k, v, attn_mask, enable_gqa):
    if HAS_SDPA:
        if enable_gqa:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, enable_gqa=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    return masked_attention(q, k, v, attn_mask, q.shape[-3] // k.shape[-3])  # torch < 2.0


class SparsePrefill:
    case = "sparse_prefill"

    def __init__(self, heads, chunk, ctx, dev):
        self.h, self.chunk, self.ctx, self.dev = heads, chunk, ctx, dev
        self.off = ctx - chunk
        nqb, self.nkb = chunk // BS, ctx // BS
        self.q = bf16_randn((1, heads.hq, chunk, D), dev)
        self.k = bf16_randn((1, heads.hkv, ctx, D), dev)
        self.v = bf16_randn((1, heads.hkv, ctx, D), dev)
        self.own = self.off // BS + torch.arange(nqb, device=dev)
        self.sel = random_selection(heads.hkv, self.own, self.nkb, dev)
        self.parts = flex_mask_parts(self.sel, self.own, self.nkb, heads)
        self.shape = "chunk=%d ctx=%d Hq=%d Hkv=%d" % (chunk, ctx, heads.hq, heads.hkv)

    def peers(self, compiled):
        if HAS_FLEX:
            bm = make_block_mask(self.parts, self.chunk, self.ctx, self.off)
            if compiled:
                fn = torch.compile(flex_attention, dynamic=False)
                return [("flex_attention.compiled", lambda: fn(self.q, self.k, self.v,
                                                               block_mask=bm, enable_gqa=True))]
            bm = make_block_mask(self.parts, self.chunk, self.ctx, self.off, selection_mask_mod(
                self.sel, self.nkb, self.off, self.h.group))
            return [("flex_attention.eager", lambda: flex_attention(
                self.q, self.k, self.v, block_mask=bm, enable_gqa=True))]
        if compiled:
            return []
        mask = dense_from_parts(self.parts, self.chunk, self.ctx, self.off)[None]
        return [("flex_attention.emulated", lambda: masked_attention(
            self.q, self.k, self.v, mask, self.h.group))]

    def check(self, out, max_rows=None):
        """rel L2 error against fp64 dense attention over the selected keys, on sampled rows."""
        rows = torch.arange(self.chunk, device=self.dev)
        if max_rows and self.chunk > max_rows:
            rows = torch.cat([rows[:1], rows[-1:], rows[torch.randperm(
                self.chunk, device=self.dev)[:max_rows - 2]]])
        g = self.h.group
        qb = rows // BS
        allow = allowed_tokens(self.sel[:, qb], self.nkb)  # [G, n, ctx]
        allow &= torch.arange(self.ctx, device=self.dev) <= (self.off + rows)[:, None]
        q = self.q[0, :, rows].double()  # [Hq, n, D]
        k = self.k[0].double().repeat_interleave(g, 0)
        v = self.v[0].double().repeat_interleave(g, 0)
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D)
        s = s.masked_fill(~allow.repeat_interleave(g, 0), NEG)
        ref = torch.matmul(torch.softmax(s, -1), v)
        return rel_err(out[0, :, rows], ref)


# ----------------------------------------------------------------------------------------------
# Peer 2: sparse decode, gather + SDPA

def decode_gather_sdpa(q, k_cache, v_cache, block_table, sel, seq_len, fold):
    """q [R, Hq, D]; caches [NB, BS, Hkv, D]; block_table [R, nb]; sel [R, Hkv, TOPK] logical
    blocks (-1 padded); seq_len [R]. -> [R, Hq, D]."""
    R, Hq, Dh = q.shape
    G = sel.shape[1]
    group = Hq // G
    phys = torch.gather(block_table, 1, sel.clamp(min=0).reshape(R, G * TOPK)).view(R, G, TOPK, 1)
    tok = torch.arange(BS, device=q.device)
    g = torch.arange(G, device=q.device).view(1, G, 1, 1)
    K = k_cache[phys, tok, g].reshape(R, G, TOPK * BS, Dh)  # [R, G, 2048, D]
    V = v_cache[phys, tok, g].reshape(R, G, TOPK * BS, Dh)
    pos = sel.unsqueeze(-1) * BS + tok
    ok = (sel.unsqueeze(-1) >= 0) & (pos <= (seq_len - 1).view(R, 1, 1, 1))
    ok = ok.reshape(R, G, 1, TOPK * BS)
    if fold:  # the group's query heads as the query length: one KV head per "head"
        out = sdpa(q.view(R, G, group, Dh), K, V, ok, False)
        return out.reshape(R, Hq, Dh)
    mask = ok.repeat_interleave(group, dim=1) if G > 1 else ok
    return sdpa(q.view(R, Hq, 1, Dh), K, V, mask, True).view(R, Hq, Dh)


class SparseDecode:
    case = "sparse_decode"

    def __init__(self, heads, rows, ctx, dev):
        self.h, self.rows, self.ctx, self.dev = heads, rows, ctx, dev
        self.nb = nb = ctx // BS
        pool = rows * nb + 7
        self.k_cache = bf16_randn((pool, BS, heads.hkv, D), dev)
        self.v_cache = bf16_randn((pool, BS, heads.hkv, D), dev)
        self.block_table = torch.randperm(pool, device=dev)[:rows * nb].view(rows, nb)
        self.seq_len = ctx - torch.randint(0, BS, (rows,), device=dev)  # own block partial
        self.q = bf16_randn((rows, heads.hq, D), dev)
        own = (self.seq_len - 1) // BS
        self.sel = random_selection(heads.hkv, own, nb, dev).permute(1, 0, 2).contiguous()
        self.shape = "rows=%d ctx=%d Hq=%d Hkv=%d" % (rows, ctx, heads.hq, heads.hkv)

    def peers(self, compiled):
        out = []
        for fold in (False, True):
            name = "gather+sdpa.%s.%s" % ("fold" if fold else "gqa",
                                         "compiled" if compiled else "eager")
            fn = decode_gather_sdpa
            if compiled:
                fn = torch.compile(decode_gather_sdpa, dynamic=False)
            out.append((name, (lambda fn, fold: lambda: fn(
                self.q, self.k_cache, self.v_cache, self.block_table, self.sel, self.seq_len,
                fold))(fn, fold)))
        return out

    def check(self, out, max_rows=None):
        R, G, g = self.rows, self.h.hkv, self.h.group
        N = self.nb * BS
        K = self.k_cache[self.block_table].reshape(R, N, G, D).permute(0, 2, 1, 3).double()
        V = self.v_cache[self.block_table].reshape(R, N, G, D).permute(0, 2, 1, 3).double()
        allow = allowed_tokens(self.sel.permute(1, 0, 2), self.nb).permute(1, 0, 2)  # [R, G, N]
        allow &= torch.arange(N, device=self.dev) < self.seq_len.view(R, 1, 1)
        q = self.q.double().view(R, G, g, D)
        s = torch.matmul(q, K.transpose(-1, -2)) / math.sqrt(D)  # [R, G, g, N]
        s = s.masked_fill(~allow[:, :, None, :], NEG)
        ref = torch.matmul(torch.softmax(s, -1), V).reshape(R, self.h.hq, D)
        return rel_err(out, ref)


# ----------------------------------------------------------------------------------------------
# Peer 3: index scoring + block max + top-k

def block_topk(s, p):
    """s [..., N] token scores (N a multiple of BS), p [...] broadcastable: the last visible
    position. -> (topk int32 [..., TOPK] (-1 padded), block scores [..., N / BS] (-inf where
    nothing is visible))."""
    N = s.shape[-1]
    nb = N // BS
    j = torch.arange(N, device=s.device)
    s = s.masked_fill(j > p.unsqueeze(-1), NEG)
    S = s.view(*s.shape[:-1], nb, BS).amax(-1)
    own = (p // BS).unsqueeze(-1)
    forced = S.masked_fill(torch.arange(nb, device=s.device) == own, float("inf"))
    k = min(TOPK, nb)
    val, idx = forced.topk(k, dim=-1)
    idx = torch.where(val == NEG, torch.full_like(idx, -1), idx)
    if k < TOPK:
        idx = torch.cat([idx, idx.new_full(idx.shape[:-1] + (TOPK - k,), -1)], -1)
    return idx.to(torch.int32), S


def index_decode_paged(iq, ik_cache, block_table, seq_len):
    """iq [R, Hi, Di]; ik_cache [NB, BS, Di]; block_table [R, nb] -> topk [R, Hi, TOPK]."""
    R, nb = block_table.shape
    k = ik_cache[block_table].view(R, nb * BS, iq.shape[-1])
    s = torch.matmul(iq, k.transpose(1, 2))  # [R, Hi, N] bf16 (fp32 accumulate)
    return block_topk(s, (seq_len - 1).view(R, 1))


def index_decode_contig(iq, ik, seq_len):
    """iq [R, Hi, Di]; ik [R, N, Di] contiguous per request."""
    s = torch.matmul(iq, ik.transpose(1, 2))
    return block_topk(s, (seq_len - 1).view(-1, 1))


def index_prefill_paged(iq, ik_cache, block_table, start):
    """iq [T, Hi, Di] of a chunk whose request already holds `start` tokens; block_table [nb]
    covering start + T tokens -> topk [T, Hi, TOPK]."""
    T = iq.shape[0]
    k = ik_cache[block_table].view(-1, iq.shape[-1])
    s = torch.matmul(iq, k.t())  # [T, Hi, N]
    p = start + torch.arange(T, device=iq.device)
    return block_topk(s, p.view(T, 1))


def ref_index(iq, keys, p):
    """fp64 reference. iq [R, Hi, Di], keys [R, N, Di], p [R] -> (topk ascending [R, Hi, TOPK]
    -1 padded, block scores [R, Hi, nb]); ties to the lower block id."""
    s = torch.matmul(iq.double(), keys.double().transpose(1, 2))
    N = s.shape[-1]
    nb = N // BS
    s = s.masked_fill(torch.arange(N, device=s.device) > p.view(-1, 1, 1), NEG)
    S = s.view(*s.shape[:-1], nb, BS).amax(-1)
    own = (p // BS).view(-1, 1, 1)
    forced = S.masked_fill(torch.arange(nb, device=s.device) == own, float("inf"))
    order = torch.sort(-forced, dim=-1, stable=True).indices[..., :min(TOPK, nb)]
    val = forced.gather(-1, order)
    order = torch.where(val == NEG, torch.full_like(order, -1), order)
    return order, S


def check_index(topk, S, iq, keys, p):
    """rel error of the block scores; top-k: share of rows whose set equals the reference's,
    and whether every set is as good (its reference scores equal the best ones, within the
    peer's bf16 rounding of the scores)."""
    ref_topk, ref_S = ref_index(iq, keys, p)
    fin = torch.isfinite(ref_S)
    if not torch.equal(fin, torch.isfinite(S.double())):
        return "BAD (visible blocks differ)"
    err = rel_err(S.double()[fin], ref_S[fin])
    k = ref_topk.shape[-1]
    got = topk.long()
    if k < TOPK and not bool((got[..., k:] == -1).all()):
        return "BAD (padding)"
    got = got[..., :k]
    a = torch.where(got < 0, torch.full_like(got, 1 << 30), got).sort(-1).values
    b = torch.where(ref_topk < 0, torch.full_like(ref_topk, 1 << 30), ref_topk).sort(-1).values
    exact = (a == b).all(-1).double().mean().item()
    nb = ref_S.shape[-1]
    own = (p // BS).view(-1, 1, 1)
    forced = ref_S.masked_fill(torch.arange(nb, device=S.device) == own, 1e300)
    forced = forced.masked_fill(~fin, -1e300)
    got_v = forced.gather(-1, got.clamp(min=0)).masked_fill(got < 0, -1e300).sort(-1).values
    ref_v = forced.gather(-1, ref_topk.clamp(min=0)).masked_fill(ref_topk < 0, -1e300)
    ref_v = ref_v.sort(-1).values
    tol = 2.0 ** -7 * ref_S[fin].abs().max().item()
    dup = bool(((a[..., 1:] == a[..., :-1]) & (a[..., 1:] < (1 << 30))).any())
    good = bool(((got_v - ref_v).abs() <= tol).all()) and not dup
    verdict = "ok" if err < 1e-2 and good else "BAD"
    return "S %.1e, sel exact %.0f%% %s %s" % (err, 100 * exact,
                                               "equiv" if good else "NOT-equiv", verdict)


class IndexDecode:
    case = "index_decode"

    def __init__(self, heads, rows, ctx, dev):
        self.h, self.rows, self.ctx, self.dev = heads, rows, ctx, dev
        self.nb = nb = ctx // BS
        pool = rows * nb + 7
        self.ik_cache = bf16_randn((pool, BS, DI), dev)
        self.block_table = torch.randperm(pool, device=dev)[:rows * nb].view(rows, nb)
        self.ik = self.ik_cache[self.block_table].view(rows, nb * BS, DI).clone()  # contiguous
        self.seq_len = ctx - torch.randint(0, BS, (rows,), device=dev)
        self.iq = bf16_randn((rows, heads.hi, DI), dev)
        self.shape = "rows=%d ctx=%d Hi=%d" % (rows, ctx, heads.hi)

    def peers(self, compiled):
        sfx = "compiled" if compiled else "eager"
        fp = index_decode_paged
        fc = index_decode_contig
        if compiled:
            fp = torch.compile(index_decode_paged, dynamic=False)
            fc = torch.compile(index_decode_contig, dynamic=False)
        return [("index+topk.paged." + sfx,
                 lambda: fp(self.iq, self.ik_cache, self.block_table, self.seq_len)),
                ("index+topk.contig." + sfx, lambda: fc(self.iq, self.ik, self.seq_len))]

    def check(self, out, max_rows=None):
        topk, S = out
        return check_index(topk, S, self.iq, self.ik, self.seq_len - 1)


class IndexPrefill:
    case = "index_prefill"

    def __init__(self, heads, chunk, ctx, dev):
        self.h, self.chunk, self.ctx, self.dev = heads, chunk, ctx, dev
        self.start = ctx - chunk
        nb = ctx // BS
        pool = nb + 7
        self.ik_cache = bf16_randn((pool, BS, DI), dev)
        self.block_table = torch.randperm(pool, device=dev)[:nb]
        self.iq = bf16_randn((chunk, heads.hi, DI), dev)
        self.shape = "chunk=%d ctx=%d Hi=%d" % (chunk, ctx, heads.hi)

    def peers(self, compiled):
        fn = index_prefill_paged
        if compiled:
            fn = torch.compile(index_prefill_paged, dynamic=False)
        return [("index+topk.paged." + ("compiled" if compiled else "eager"),
                 lambda: fn(self.iq, self.ik_cache, self.block_table, self.start))]

    def check(self, out, max_rows=None):
        topk, S = out
        rows = torch.arange(self.chunk, device=self.dev)
        if max_rows and self.chunk > max_rows:
            rows = torch.cat([rows[:1], rows[-1:], rows[torch.randperm(
                self.chunk, device=self.dev)[:max_rows - 2]]])
        keys = self.ik_cache[self.block_table].view(1, -1, DI).expand(rows.numel(), -1, -1)
        return check_index(topk[rows], S[rows], self.iq[rows], keys, self.start + rows)


# ----------------------------------------------------------------------------------------------
# Peer 4: norm + RoPE + insert

def rope_cache(max_pos, dev):
    inv = 1.0 / (THETA ** (torch.arange(0, ROT, 2, dtype=torch.float64, device=dev) / ROT))
    f = torch.arange(max_pos, dtype=torch.float64, device=dev)[:, None] * inv
    return torch.cat([f.cos(), f.sin()], -1).float()  # [max_pos, ROT]: cos | sin


def norm_rope_insert(q, k, v, iq, ik, wq, wk, wiq, wik, cos_sin, pos, slot, k_cache, v_cache,
                     ik_cache):
    """q [T, Hq, D], k/v [T, Hkv, D], iq [T, Hi, DI], ik [T, DI]; w* [D]; pos, slot [T] (slot -1:
    the scratch slot at the caches' end). Writes k, v, ik at the slots; returns (q, iq) bf16."""
    cs = cos_sin[pos].unsqueeze(1)  # [T, 1, ROT]
    cos, sin = cs[..., :ROT // 2], cs[..., ROT // 2:]

    def norm_rope(x, w):
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * (1.0 + w.float())
        x1, x2 = x[..., :ROT // 2], x[..., ROT // 2:ROT]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, x[..., ROT:]], -1).to(
            torch.bfloat16)

    nslots = k_cache.shape[0] * k_cache.shape[1]
    s = torch.where(slot < 0, torch.full_like(slot, nslots - 1), slot)
    k_cache.view(nslots, *k_cache.shape[2:])[s] = norm_rope(k, wk)
    v_cache.view(nslots, *v_cache.shape[2:])[s] = v
    ik_cache.view(nslots, ik_cache.shape[-1])[s] = norm_rope(ik.unsqueeze(1), wik).squeeze(1)
    return norm_rope(q, wq), norm_rope(iq, wiq)


class NormRopeInsert:
    case = "norm_rope_insert"

    def __init__(self, heads, tokens, dev, with_skip=False):
        self.h, self.tokens, self.dev = heads, tokens, dev
        T = tokens
        nblocks = max(64, T // BS) + 64
        # The caches hold one block more than the pool: its last slot is the scratch for slot -1.
        self.k_cache = bf16_randn((nblocks + 1, BS, heads.hkv, D), dev)
        self.v_cache = bf16_randn((nblocks + 1, BS, heads.hkv, D), dev)
        self.ik_cache = bf16_randn((nblocks + 1, BS, DI), dev)
        if T <= 512:  # decode-like: one token per request, each in its own block
            self.pos = torch.randint(0, 8192, (T,), device=dev)
            blocks = torch.randperm(nblocks, device=dev)[:T]
            self.slot = blocks * BS + self.pos % BS
        else:  # a chunk: positions 0..T-1 through a scattered block table
            self.pos = torch.arange(T, device=dev)
            table = torch.randperm(nblocks, device=dev)[:(T + BS - 1) // BS]
            self.slot = table[self.pos // BS] * BS + self.pos % BS
        if with_skip:
            self.slot[1] = -1
        self.q = bf16_randn((T, heads.hq, D), dev, 2.0)
        self.k = bf16_randn((T, heads.hkv, D), dev, 2.0)
        self.v = bf16_randn((T, heads.hkv, D), dev)
        self.iq = bf16_randn((T, heads.hi, DI), dev, 2.0)
        self.ik = bf16_randn((T, DI), dev, 2.0)
        self.w = [bf16_randn((D,), dev, 0.3) for _ in range(4)]
        self.cos_sin = rope_cache(131072, dev)
        self.before = [c.clone() for c in (self.k_cache, self.v_cache, self.ik_cache)]
        self.shape = "tokens=%d %s" % (T, heads)

    def args(self):
        return (self.q, self.k, self.v, self.iq, self.ik, *self.w, self.cos_sin, self.pos,
                self.slot, self.k_cache, self.v_cache, self.ik_cache)

    def peers(self, compiled):
        fn = norm_rope_insert
        if compiled:
            fn = torch.compile(norm_rope_insert, dynamic=False)
        return [("norm+rope+insert." + ("compiled" if compiled else "eager"),
                 lambda: fn(*self.args()))]

    def check(self, out, max_rows=None):
        qo, iqo = out
        pos = self.pos.double()
        inv = 1.0 / (THETA ** (torch.arange(0, ROT, 2, dtype=torch.float64, device=self.dev)
                               / ROT))
        ang = (pos[:, None] * inv)[:, None, :]
        cos, sin = ang.cos(), ang.sin()

        def ref(x, w):
            x = x.double()
            x = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * (1 + w.double())
            x1, x2 = x[..., :ROT // 2], x[..., ROT // 2:ROT]
            return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, x[..., ROT:]], -1)

        wq, wk, wiq, wik = self.w
        errs = [rel_err(qo, ref(self.q, wq)), rel_err(iqo, ref(self.iq, wiq))]
        live = self.slot >= 0
        s = self.slot[live]
        caches = (self.k_cache, self.v_cache, self.ik_cache)
        refs = (ref(self.k, wk), self.v.double(), ref(self.ik.unsqueeze(1), wik).squeeze(1))
        untouched = True
        for c, r, b in zip(caches, refs, self.before):
            flat = c.view(-1, *c.shape[2:])
            errs.append(rel_err(flat[s], r[live]))
            keep = torch.ones(flat.shape[0], dtype=torch.bool, device=self.dev)
            keep[s] = False
            keep[-1] = False  # the scratch slot
            untouched &= torch.equal(flat[keep], b.view(-1, *b.shape[2:])[keep])
        err = max(errs)
        return "%.1e%s %s" % (err, "" if untouched else " (other slots written)",
                              "ok" if err < 1e-2 and untouched else "BAD")


# ----------------------------------------------------------------------------------------------
# Timing and checks

def rel_err(out, ref):
    out = out.double()
    ref = ref.double()
    if not bool(torch.isfinite(out).all()):
        return float("nan")
    return ((out - ref).norm() / ref.norm().clamp(min=1e-300)).item()


def verdict(x, tol=2e-2):
    if isinstance(x, str):
        return x
    return "%.1e %s" % (x, "ok" if x == x and x < tol else "BAD")


class Timer:
    def __init__(self, dev):
        self.dev = dev
        self.cuda = dev.type == "cuda"
        if self.cuda:
            self.flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def __call__(self, fn, reps):
        """Median, p10, p90 in us over `reps` launches, each after an L2 flush."""
        for _ in range(3 if self.cuda else 1):
            fn()
        self.sync()
        if self.cuda:
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(reps)]
            for a, b in ev:
                self.flush.zero_()
                a.record()
                fn()
                b.record()
            torch.cuda.synchronize()
            us = sorted(a.elapsed_time(b) * 1e3 for a, b in ev)
        else:
            us = []
            for _ in range(reps):
                t = time.perf_counter()
                fn()
                us.append((time.perf_counter() - t) * 1e6)
            us.sort()
        return stats(us)

    def graph(self, fn, reps):
        """The same, timing replays of a CUDA graph of one launch (launch gaps gone: the device
        time). None where there is no CUDA."""
        if not self.cuda:
            return None
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(reps)]
        for a, b in ev:
            self.flush.zero_()
            a.record()
            g.replay()
            b.record()
        torch.cuda.synchronize()
        del g
        return stats([a.elapsed_time(b) * 1e3 for a, b in ev])


def stats(us):
    us = sorted(us)
    pick = lambda f: us[min(len(us) - 1, int(f * len(us)))]
    return pick(0.5), pick(0.1), pick(0.9)


def cases(heads, dev, smoke):
    """(priority order) constructors of the timed cases."""
    if smoke:
        return [
            lambda: SparsePrefill(heads, 256, 2560, dev),
            lambda: SparsePrefill(heads, 384, 384, dev),
            lambda: SparseDecode(heads, 3, 2560, dev),
            lambda: IndexDecode(heads, 3, 2560, dev),
            lambda: IndexDecode(heads, 2, 1280, dev),
            lambda: IndexPrefill(heads, 384, 2432, dev),
            lambda: IndexPrefill(heads, 256, 256, dev),
            lambda: NormRopeInsert(heads, 5, dev, with_skip=True),
            lambda: NormRopeInsert(heads, 600, dev),
        ]
    return [
        lambda: SparsePrefill(heads, 8192, 8192, dev),
        lambda: SparseDecode(heads, 16, 8192, dev),
        lambda: SparseDecode(heads, 128, 8192, dev),
        lambda: IndexDecode(heads, 16, 131072, dev),
        lambda: IndexDecode(heads, 16, 8192, dev),
        lambda: NormRopeInsert(heads, 16, dev),
        lambda: NormRopeInsert(heads, 8192, dev),
        lambda: IndexPrefill(heads, 8192, 8192, dev),
        lambda: SparsePrefill(heads, 8192, 32768, dev),
    ]


CASE_NAMES = ("sparse_prefill", "sparse_decode", "index_decode", "index_prefill",
              "norm_rope_insert")
CASE_CLASSES = (SparsePrefill, SparseDecode, IndexDecode, IndexPrefill, NormRopeInsert)


def wanted(only, case, peer=None):
    if not only:
        return True
    for w in only:
        if w == case or (peer is not None and w in peer.split(".")) or (
                peer is not None and w in peer and w not in CASE_NAMES):
            return True
    return False


def case_wanted(only, cls):
    if not only:
        return True
    if cls.case in only:
        return True
    return any(w not in CASE_NAMES for w in only)  # a peer word: decided per peer


def small_checks(heads, dev, only):
    """Every peer, eager, at a small size against the dense fp64 reference."""
    print("# small-size checks (eager, vs dense float64 reference of docs/kernels.md's MSA):")
    torch.manual_seed(1234)
    for make in cases(heads, dev, smoke=True):
        try:
            c = make()
        except Exception as e:  # noqa: BLE001
            print("  construct failed: %s: %s" % (type(e).__name__, e))
            continue
        if not case_wanted(only, type(c)):
            continue
        for name, fn in c.peers(compiled=False):
            if not wanted(only, c.case, name):
                continue
            try:
                print("  %-30s %-16s %-32s %s" % (name, c.case, c.shape, verdict(c.check(fn()))))
            except Exception as e:  # noqa: BLE001
                print("  %-30s %-16s %-32s ERROR %s: %s" % (name, c.case, c.shape,
                                                           type(e).__name__, str(e)[:200]))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tp", type=int, default=4, choices=(1, 4))
    ap.add_argument("--reps", type=int, default=0, help="timed launches per row (default 100)")
    ap.add_argument("--only", default="", help="comma-separated cases or peer words")
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny sizes, eager, CPU")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--time-limit-s", type=float, default=0,
                    help="skip the rows left once this many seconds have passed (0: none)")
    ap.add_argument("--check-rows", type=int, default=256,
                    help="rows sampled for the timed-size check of the prefill peers")
    a = ap.parse_args()
    t0 = time.time()
    only = [w for w in a.only.split(",") if w]
    warnings.filterwarnings("ignore")
    if a.cpu_smoke:
        dev = torch.device("cpu")
    elif torch.cuda.is_available():
        dev = torch.device("cuda")
    else:
        print("msa_peers: no GPU (torch %s); use --cpu-smoke for the CPU code paths" %
              torch.__version__)
        return 0
    heads = Heads(a.tp)
    seed = a.seed if a.seed is not None else int.from_bytes(os.urandom(4), "little")
    gpu = torch.cuda.get_device_name() if dev.type == "cuda" else "cpu (smoke: sizes tiny)"
    print("# msa_peers: torch %s, %s, tp %d (%s), bf16 KV, seed %d" % (
        torch.__version__, gpu, a.tp, heads, seed))
    print("# flex_attention %s, sdpa %s, torch.compile %s" % (
        "yes" if HAS_FLEX else "no (emulated densely)",
        "yes" if HAS_SDPA else "no (dense fallback)",
        "yes" if HAS_COMPILE and not a.cpu_smoke else "not used"))
    sys.stdout.flush()
    if HAS_COMPILE and not a.cpu_smoke:
        import torch._dynamo as dynamo
        for attr in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                     "accumulated_recompile_limit"):
            if hasattr(dynamo.config, attr):
                setattr(dynamo.config, attr, 256)

    small_checks(heads, dev, only)

    timer = Timer(dev)
    reps = a.reps or (100 if dev.type == "cuda" else 2)
    modes = [False] if a.cpu_smoke or not HAS_COMPILE else [False, True]
    rows = []
    torch.manual_seed(seed)
    for make in cases(heads, dev, a.cpu_smoke):
        if a.time_limit_s and time.time() - t0 > a.time_limit_s:
            rows.append(("(time limit)", "-", "rows left skipped", None, None, None, None,
                         "-"))
            break
        try:
            c = make()
        except Exception as e:  # noqa: BLE001
            rows.append(("(construct)", "-", "%s: %s" % (type(e).__name__, str(e)[:80]),
                         None, None, None, None, "-"))
            continue
        if not case_wanted(only, type(c)):
            continue
        for compiled in modes:
            if isinstance(c, SparsePrefill) and not compiled and HAS_FLEX and dev.type == "cuda":
                continue  # eager flex is a dense math fallback: not a peer worth timing
            try:
                peers = c.peers(compiled)
            except Exception as e:  # noqa: BLE001
                rows.append(("(peers)", c.case, "%s: %s" % (type(e).__name__, str(e)[:80]),
                             None, None, None, None, "-"))
                continue
            for name, fn in peers:
                if not wanted(only, c.case, name):
                    continue
                if a.time_limit_s and time.time() - t0 > a.time_limit_s:
                    rows.append((name, c.case, c.shape, None, None, None, None, "time limit"))
                    continue
                t = time.time()
                try:
                    out = fn()  # the first call compiles
                    timer.sync()
                    try:
                        chk = verdict(c.check(out, max_rows=a.check_rows))
                    except Exception as e:  # noqa: BLE001
                        chk = "check ERROR %s: %s" % (type(e).__name__, str(e)[:60])
                    del out
                    med, p10, p90 = timer(fn, reps)
                    try:
                        gr = timer.graph(fn, reps)
                    except Exception as e:  # noqa: BLE001
                        gr = None
                        chk += " (graph: %s: %s)" % (type(e).__name__, str(e)[:60])
                    rows.append((name, c.case, c.shape, med, p10, p90, gr, chk))
                except Exception as e:  # noqa: BLE001
                    rows.append((name, c.case, c.shape, None, None, None, None,
                                 "ERROR %s: %s" % (type(e).__name__, str(e)[:100])))
                print("  ... %-30s %-16s %-34s %6.1f s" % (name, c.case, c.shape,
                                                          time.time() - t))
                sys.stdout.flush()
        del c
        if dev.type == "cuda":
            torch.cuda.empty_cache()

    print("# %s, torch %s, tp %d; us over %d launches, L2 flushed (256 MB written) before each;"
          " median/p10/p90: plain launches (host gaps included), graph: CUDA-graph replays"
          % (gpu, torch.__version__, a.tp, reps))
    print("%-27s %-16s %-34s %9s %8s %8s %9s %8s %8s  %s" % (
        "peer", "case", "shape", "median_us", "p10", "p90", "graph_med", "g_p10", "g_p90",
        "check"))
    fmt = lambda x: "-" if x is None else "%.1f" % x
    for name, case, shape, med, p10, p90, gr, chk in rows:
        g = gr or (None, None, None)
        print("%-27s %-16s %-34s %9s %8s %8s %9s %8s %8s  %s" % (
            name, case, shape, fmt(med), fmt(p10), fmt(p90), fmt(g[0]), fmt(g[1]), fmt(g[2]),
            chk))
    print("# total %.0f s" % (time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())

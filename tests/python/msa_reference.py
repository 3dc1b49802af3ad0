"""What MiniMax-M3's msa_* launchers compute, in PyTorch, written from docs/kernels.md (MSA) and
kernels/nvfp4_msa/msa_layout.h (not from the C++ references of tests/gpu/msa_*_reference.cc):
the caches decoded from their bit layouts, then plain tensor math in float64. The NVFP4 row is
docs/kernels.md's (reference.py decodes and rounds it). Used by test_msa_gpu.py.

Layouts: kv_cache uint8 [blocks, 2, Hkv, 128, D/2 + D/16] (K then V); index_cache bf16
[blocks, 128, Di]; block_table int32 [requests, max_blocks], slot = block * 128 + offset.
"""

import math

import torch

import reference as ref

BLOCK = 128


def norm_rope(x, w, pos, eps=1e-6, theta=5e6, rope_dim=64):
    """x bf16 [T, H, d] (or [T, d]), w float32 [d], pos int [T] -> float64 of x's shape: Gemma
    RMSNorm per head over d (x * rsqrt(mean(x^2) + eps) * (1 + w)), then NeoX RoPE of the first
    rope_dim dims at pos (pairs (i, i + rope_dim/2), inv_freq_i = theta^(-2i/rope_dim))."""
    flat = x.dim() == 2
    xd = x.double()[:, None] if flat else x.double()
    normed = xd * torch.rsqrt((xd * xd).mean(dim=-1, keepdim=True) + eps) * (1.0 + w.double())
    half = rope_dim // 2
    inv = theta ** (-torch.arange(half, dtype=torch.float64, device=x.device) * 2.0 / rope_dim)
    ang = (pos.double()[:, None] * inv[None, :])[:, None, :]  # [T, 1, half]
    c, s = torch.cos(ang), torch.sin(ang)
    x1, x2 = normed[..., :half], normed[..., half:rope_dim]
    out = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, normed[..., rope_dim:]], dim=-1)
    return out[:, 0] if flat else out


def kv_rows(kv_cache, slot, side, g, head=None):
    """The dequantized rows of side 0 (K) or 1 (V) of the tokens at slot (int64 [n], every one
    >= 0), global scale g: float64 [n, Hkv, D], or [n, D] of one KV head."""
    d = kv_cache.shape[-1] * 16 // 9  # D/2 + D/16 bytes
    slot = slot.to(torch.int64)
    if head is None:
        rec = kv_cache[:, side][slot // BLOCK, :, slot % BLOCK]  # [n, Hkv, row]
    else:
        rec = kv_cache[:, side, head][slot // BLOCK, slot % BLOCK]  # [n, row]
    return ref.nvfp4_dequant(rec, d, g)


def index_keys(index_cache, slot):
    """float64 [n, Di]: the bf16 index keys at slot."""
    slot = slot.to(torch.int64)
    return index_cache[slot // BLOCK, slot % BLOCK].double()


def slots(block_table, req, pos):
    """Slots of positions pos (int64, any shape) of requests req (broadcast to pos); positions
    past the table are clamped (callers mask them)."""
    blk = (pos // BLOCK).clamp(max=block_table.shape[1] - 1)
    return block_table.to(torch.int64)[req, blk] * BLOCK + pos % BLOCK


def block_scores(index_q, row_req, visible, block_table, index_cache, stride):
    """scores[h][t][b] = max over the keys j < visible[t] of block b of index_q[t][h] . k_j for
    b < nb(t) = ceil(visible[t] / 128), -inf for the rest of [0, stride). float64
    [Hi, rows, stride]."""
    rows = index_q.shape[0]
    j = torch.arange(stride * BLOCK, device=index_q.device)
    valid = j[None, :] < visible.to(torch.int64)[:, None]  # [rows, N]
    slot = slots(block_table, row_req.to(torch.int64)[:, None], j[None, :])
    k = index_keys(index_cache, slot)  # [rows, N, Di]
    s = torch.einsum("thd,tnd->htn", index_q.double(), k)
    s = torch.where(valid[None], s, torch.full_like(s, -math.inf))
    return s.reshape(s.shape[0], rows, stride, BLOCK).amax(dim=-1)


def topk(scores, visible, kb, init_blocks, local_blocks):
    """Per index head and row, of blocks 0..nb-1: the blocks b < init_blocks and b >= nb -
    local_blocks always, then the highest scores, ties to the lower id; kb of them (all when nb <=
    kb) in ascending order, -1 padded. int32 [Hi, rows, kb] (exact)."""
    s_all = scores.double().cpu()
    vis = visible.to(torch.int64).cpu()
    heads, rows, _ = s_all.shape
    out = torch.full((heads, rows, kb), -1, dtype=torch.int32)
    for t in range(rows):
        nb = (int(vis[t]) + BLOCK - 1) // BLOCK
        ids = torch.arange(nb)
        always = ((ids < init_blocks) | (ids >= nb - local_blocks)).to(torch.int32)
        for h in range(heads):
            # Stable sorts: by score (equal scores keep the lower id first), then always-taken
            # first (keeping that order).
            order = torch.sort(s_all[h, t, :nb], descending=True, stable=True).indices
            order = order[torch.sort(always[order], descending=True, stable=True).indices]
            chosen = torch.sort(order[:kb]).values
            out[h, t, : chosen.numel()] = chosen.to(torch.int32)
    return out.to(scores.device)


def sparse_attention(q, topk_ids, row_req, visible, block_table, kv_cache, k_scale, v_scale,
                     scale):
    """Query head h of row t (KV head g = h / (Hq / Hkv)) over the keys j < visible[t] of the
    blocks topk_ids[g][t] (-1 skipped): o = softmax(scale q . k) v, lse = ln sum exp(scale q . k).
    (o float64 [rows, Hq, D], lse float64 [rows, Hq]; zeros and -inf for a row that attends
    nothing)."""
    rows, hq, d = q.shape
    hkv, _, kb = topk_ids.shape
    group = hq // hkv
    o = torch.zeros((rows, hq, d), dtype=torch.float64, device=q.device)
    lse = torch.full((rows, hq), -math.inf, dtype=torch.float64, device=q.device)
    offsets = torch.arange(BLOCK, device=q.device)
    for g in range(hkv):
        sel = topk_ids[g].to(torch.int64)  # [rows, kb]
        j = (sel.clamp(min=0)[..., None] * BLOCK + offsets).reshape(rows, kb * BLOCK)
        valid = ((sel >= 0)[..., None].expand(rows, kb, BLOCK).reshape(rows, kb * BLOCK)
                 & (j < visible.to(torch.int64)[:, None]))
        slot = slots(block_table, row_req.to(torch.int64)[:, None], j)  # [rows, N]
        k = kv_rows(kv_cache, slot.reshape(-1), 0, k_scale, g).reshape(rows, -1, d)
        v = kv_rows(kv_cache, slot.reshape(-1), 1, v_scale, g).reshape(rows, -1, d)
        heads = slice(g * group, (g + 1) * group)
        s = torch.einsum("rhd,rnd->rhn", q[:, heads].double(), k) * scale
        s = torch.where(valid[:, None, :], s, torch.full_like(s, -math.inf))
        m = torch.logsumexp(s, dim=-1)  # [rows, group]
        p = torch.exp(s - torch.where(torch.isfinite(m), m, torch.zeros_like(m))[..., None])
        p = torch.where(valid[:, None, :], p, torch.zeros_like(p))
        o[:, heads] = torch.einsum("rhn,rnd->rhd", p, v)
        lse[:, heads] = m
    return o, lse


rel_err = ref.rel_err
nvfp4_quantize = ref.nvfp4_quantize

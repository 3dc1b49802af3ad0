"""What each launcher computes, in PyTorch, written from docs/kernels.md (not from the C++
reference of tests/gpu/reference.cc): the number formats decoded from their bit layouts, then plain
tensor math in float64. Used by test_gpu.py and examples/serve_warm.py on the GPU; the format
helpers are checked on the CPU by test_runtime.py.
"""

import math

import torch

# ---- number formats (docs/kernels.md "Conventions") ------------------------------------------

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _e4m3_value(code, fnuz):
    """The value of an 8-bit E4M3 code: sign, 4 exponent bits (bias 7, or 8 for fnuz), 3
    mantissa bits; exponent 0 is subnormal. fn: S.1111.111 is NaN (max 448). fnuz: only 0x80 is
    NaN and there is no negative zero (max 240)."""
    sign = -1.0 if code & 0x80 else 1.0
    exp = (code >> 3) & 0xF
    man = code & 0x7
    if fnuz:
        if code == 0x80:
            return math.nan
        bias = 8
    else:
        if exp == 0xF and man == 0x7:
            return math.nan
        bias = 7
    if exp == 0:
        return sign * (man / 8.0) * 2.0 ** (1 - bias)
    return sign * (1.0 + man / 8.0) * 2.0 ** (exp - bias)


def e4m3_table(fnuz=False):
    """float64 [256]: the value of every code."""
    return torch.tensor([_e4m3_value(c, fnuz) for c in range(256)], dtype=torch.float64)


def e4m3_max(fnuz=False):
    return 240.0 if fnuz else 448.0


def e4m3_round(x, fnuz=False):
    """x (float64) to the nearest E4M3 code's value, ties to the even code, saturating at the
    largest finite value (what a satfinite conversion does)."""
    t = e4m3_table(fnuz).to(x.device)
    # The positive codes 0..127 are in value order; drop the NaN among them (fn's 0x7f).
    codes = torch.tensor([c for c in range(128) if not math.isnan(_e4m3_value(c, fnuz))],
                         dtype=torch.int64, device=x.device)
    pos = t[codes]
    a = x.abs().clamp(max=pos[-1].item())
    hi = torch.searchsorted(pos, a).clamp(max=len(pos) - 1)
    lo = (hi - 1).clamp(min=0)
    d_lo, d_hi = a - pos[lo], pos[hi] - a
    take_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (codes[hi] % 2 == 0))
    return torch.where(take_hi, pos[hi], pos[lo]) * torch.sign(x)


def e2m1_round(x):
    """x (float64) to the nearest E2M1 value (round to nearest even), saturating at 6."""
    grid = torch.tensor(E2M1, dtype=torch.float64, device=x.device)
    a = x.abs().clamp(max=6.0)
    hi = torch.searchsorted(grid, a).clamp(max=7)
    lo = (hi - 1).clamp(min=0)
    d_lo, d_hi = a - grid[lo], grid[hi] - a
    take_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    return torch.where(take_hi, grid[hi], grid[lo]) * torch.sign(x)


def bf16_bits_to_float(u16):
    """int16/int32 tensor of bf16 bit patterns -> float64."""
    v = (u16.to(torch.int64) & 0xFFFF) << 16
    v = torch.where(v >= 2 ** 31, v - 2 ** 32, v)
    return v.to(torch.int32).view(torch.float32).double()


def nvfp4_dequant(record, n, g):
    """uint8 [..., n/2 + n/16]: n E2M1 values two per byte (low nibble first), then one E4M3 (fn)
    scale per 16 values -> float64 [..., n] = e2m1(q) * s * g."""
    grid = torch.tensor(E2M1, dtype=torch.float64, device=record.device)
    vals = record[..., : n // 2].to(torch.int64)
    nib = torch.stack([vals & 0xF, vals >> 4], dim=-1).reshape(*vals.shape[:-1], n)
    mag = grid[nib & 0x7]
    q = torch.where((nib & 0x8) != 0, -mag, mag)
    s = e4m3_table(False).to(record.device)[record[..., n // 2: n // 2 + n // 16].to(torch.int64)]
    return q * s.repeat_interleave(16, dim=-1) * g


def nvfp4_quantize(x, g):
    """float64 [..., n] -> the values an NVFP4 encoding of x decodes to (docs/kernels.md): per 16
    values s = e4m3(amax / 6 / g), q = rne(x / (s g)) on the E2M1 grid."""
    shape = x.shape
    b = x.reshape(*shape[:-1], shape[-1] // 16, 16)
    s = e4m3_round(b.abs().amax(dim=-1, keepdim=True) / 6.0 / g)
    q = torch.where(s > 0, e2m1_round(b / (s * g).clamp(min=1e-300)), torch.zeros_like(b))
    return (q * s * g).reshape(shape)


# ---- paged caches (docs/kernels.md "MLA") ----------------------------------------------------

def slots(block_table, req, pos, block_size):
    """The cache slot of position pos of request req (both int64 tensors of one shape)."""
    return block_table[req, pos // block_size].to(torch.int64) * block_size + pos % block_size


def kv_records(kv_cache, slot, L, Dr, g_kv):
    """(latent float64 [..., L], rope float64 [..., Dr]) of the tokens at `slot`."""
    flat = kv_cache.reshape(-1, kv_cache.shape[-1])
    rec = flat[slot.clamp(min=0)]
    latent = nvfp4_dequant(rec[..., : L // 2 + L // 16], L, g_kv)
    rope_bytes = rec[..., L // 2 + L // 16:].to(torch.int32)
    rope = bf16_bits_to_float(rope_bytes[..., 0::2] | (rope_bytes[..., 1::2] << 8))
    return latent, rope


# ---- launchers (docs/kernels.md "MLA") -------------------------------------------------------

def fp8_bmm(x, w_codes, w_scale, fnuz=False):
    """x bf16 [M, B, K], w uint8 codes [B, N, K] -> float64 [M, B, N]: X quantized per 128-wide
    group (sx = amax / FP8_MAX, qx = fp8(X / sx)), then Σ_g sx w_s Σ_k qx W."""
    xd = x.double()
    M, B, K = xd.shape
    groups = xd.reshape(M, B, K // 128, 128)
    sx = groups.abs().amax(dim=-1, keepdim=True) / e4m3_max(fnuz)
    qx = torch.where(sx > 0, e4m3_round(groups / sx.clamp(min=1e-300), fnuz),
                     torch.zeros_like(groups))
    w = e4m3_table(fnuz).to(x.device)[w_codes.to(torch.int64)]  # [B, N, K]
    wg = w.reshape(B, w.shape[1], K // 128, 128)
    # Y[m][b][n] = Σ_g sx[m,b,g] Σ_k qx[m,b,g,k] W[b,n,g,k]
    return torch.einsum("mbgk,bngk,mbg->mbn", qx, wg, sx[..., 0]) * w_scale


def norm_rope(latent, rope, gamma, pos, eps=1e-6, theta=10000.0):
    """RMSNorm of the latent and NeoX-style RoPE of the rope part, float64."""
    x = latent.double()
    normed = x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * gamma.double()
    r = rope.double()
    half = r.shape[-1] // 2
    inv = theta ** (-torch.arange(half, dtype=torch.float64, device=r.device) * 2.0 / r.shape[-1])
    ang = pos.double()[:, None] * inv[None, :]
    c, s = torch.cos(ang), torch.sin(ang)
    x1, x2 = r[:, :half], r[:, half:]
    return normed, torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def index_scores(q, w, row_req, visible, block_table, index_cache, g_idx, stride, block_size):
    """score[t][j] = Σ_h w[t][h] relu(q[t][h] . k_j) for j < visible[t], -inf for the rest of
    [0, stride). float64 [rows, stride]."""
    Di = q.shape[-1]
    rows = q.shape[0]
    j = torch.arange(stride, device=q.device)
    req = row_req.to(torch.int64)[:, None].expand(rows, stride)
    pos = j[None, :].expand(rows, stride)
    vis = pos < visible.to(torch.int64)[:, None]
    slot = torch.where(vis, slots(block_table, req, pos.clamp(max=block_table.shape[1] *
                                                             block_size - 1), block_size),
                       torch.zeros_like(pos))
    flat = index_cache.reshape(-1, index_cache.shape[-1])
    k = nvfp4_dequant(flat[slot], Di, g_idx)  # [rows, stride, Di]
    dots = torch.einsum("thd,tjd->thj", q.double(), k).clamp(min=0)
    s = torch.einsum("th,thj->tj", w.double(), dots)
    return torch.where(vis, s, torch.full_like(s, -math.inf))


def topk(scores, visible, ktop):
    """Per row the indices of the ktop largest scores in [0, visible), ties to the lower index,
    in ascending index order, -1 past the end. int32 [rows, ktop] (exact)."""
    rows, stride = scores.shape
    out = torch.full((rows, ktop), -1, dtype=torch.int32, device=scores.device)
    for r in range(rows):
        v = int(visible[r])
        s = scores[r, :v].double()
        # Stable descending sort keeps equal scores in index order: the lower index first.
        order = torch.sort(s, descending=True, stable=True).indices[:ktop]
        chosen = torch.sort(order).values
        out[r, : chosen.numel()] = chosen.to(torch.int32)
    return out


def sparse_attention(q_latent, q_rope, topk_idx, row_req, block_table, kv_cache, g_kv, scale,
                     block_size):
    """Per row and head: softmax(scale q . k_j) v_j over the selected positions (topk_idx >= 0),
    k_j = [latent_j ; rope_j], v_j = latent_j. (out float64 [rows, H, L], lse float64 [rows, H],
    natural log; -inf and zeros for a row with nothing selected)."""
    L, Dr = q_latent.shape[-1], q_rope.shape[-1]
    rows, ktop = topk_idx.shape
    sel = topk_idx.to(torch.int64)
    valid = sel >= 0
    req = row_req.to(torch.int64)[:, None].expand(rows, ktop)
    slot = torch.where(valid, slots(block_table, req, sel.clamp(min=0), block_size),
                       torch.zeros_like(sel))
    latent, rope = kv_records(kv_cache, slot, L, Dr, g_kv)  # [rows, ktop, L], [rows, ktop, Dr]
    s = (torch.einsum("rhl,rjl->rhj", q_latent.double(), latent)
         + torch.einsum("rhd,rjd->rhj", q_rope.double(), rope)) * scale
    s = torch.where(valid[:, None, :], s, torch.full_like(s, -math.inf))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))[..., None])
    p = torch.where(valid[:, None, :], p, torch.zeros_like(p))
    return torch.einsum("rhj,rjl->rhl", p, latent), lse


def rel_err(out, ref):
    """‖out − ref‖ / ‖ref‖ over the finite entries of ref (float64)."""
    out, ref = out.double(), ref.double()
    m = torch.isfinite(ref)
    return (torch.linalg.vector_norm((out - ref)[m]) /
            torch.linalg.vector_norm(ref[m]).clamp(min=1e-300)).item()

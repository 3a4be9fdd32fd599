"""The registry of attention backends: one object per backend, chosen by name or by "auto".

A backend says what it cannot do by raising NotImplementedError from `check` (the arrays) or
`check_call` (the call's block sizes and options), so "auto" falls through to the next one in
priority order (mosaic, then triton, then xla). Each owns its default kernel
parameters per device kind. Every backend keeps one residual convention: the forward returns the
output [B, T, N, Hv] in the inputs' dtype and the logsumexp [B, N, T] in float32 natural-log
units of the (scaled, capped) logits, sinks included, and -inf on rows with nothing to attend.
The backward takes that logsumexp and delta = rowsum(dO * O) - d(logsumexp) (float32, 0 on empty
rows) and returns (dq, dk, dv) in the inputs' dtypes.

A new backend (say a Hopper one) subclasses Backend and calls `register` with its priority.
"""

from __future__ import annotations

import jax

from kvax._src.attention import validate
from kvax._src.config import FlashAttentionParamsConfig, is_hopper


# tanh.approx.f32's largest relative error (the PTX ISA gives 2^-10.987): the GPU kernels take
# that instruction for a soft cap on 16-bit inputs (libdevice's tanh, exact to float32, on
# float32 ones)
TANH_APPROX_ERROR = 2.0**-10.98


def kernel_logit_error(logits_soft_cap, dtype) -> float:
    """The largest absolute error that the GPU kernels' soft-capped logits carry by design: the
    cap c times tanh.approx.f32's relative error, for 16-bit inputs; 0 without a cap or for
    float32 inputs. It is finer than a 16-bit computation's rounding of the logits (so the
    outputs and gradients keep their 16-bit baselines), but the float32 logsumexp they return
    may move by up to this much (a logit error of e moves log sum exp by at most e)."""
    if logits_soft_cap is None or jax.numpy.dtype(dtype).itemsize > 2:
        return 0.0
    return float(logits_soft_cap) * TANH_APPROX_ERROR


class Backend:
    name: str = ""
    # kernels built when the step lowers (Triton's): the forward under differentiation has its
    # backward lowered ahead in a thread (vjp.py), so that its kernels build beside the step's
    # tracing (triton_launch.lower_ahead)
    lowers_backward_ahead: bool = False

    def check(self, query, key, value, *, platform: str) -> None:
        """Raise NotImplementedError (saying why) if this backend cannot run the call."""

    def check_call(self, *, fwd_params: FlashAttentionParamsConfig) -> None:
        """Raise NotImplementedError if this backend cannot run with these forward block sizes
        (the forward mask's)."""

    def default_params(self, device_kind: str, *, backward: bool) -> FlashAttentionParamsConfig:
        return FlashAttentionParamsConfig()

    def forward(self, opts, q, k, v, scale, sinks, q_pos, q_seg, kv_pos, kv_seg, fwd_mask):
        raise NotImplementedError

    def forward_for_grad(self, opts, q, k, v, scale, sinks, q_pos, q_seg, kv_pos, kv_seg,
                         masks):
        """The forward under differentiation: (output, logsumexp, the q its backward gets). By
        default that q is the query itself; a backend may hand its backward a prepared copy."""
        out, lse = self.forward(opts, q, k, v, scale, sinks, q_pos, q_seg, kv_pos, kv_seg,
                                masks[0])
        return out, lse, q

    def backward(self, opts, q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, out, lse, delta,
                 dout, dq_mask, dkdv_mask, fwd_mask=None):
        """fwd_mask: the forward's mask, for what it brings built (its schedule), or None."""
        raise NotImplementedError


class XlaBackend(Backend):
    """Pure JAX (blockwise.py): any platform, any shape the API accepts."""

    name = "xla"

    def forward(self, opts, q, k, v, scale, sinks, q_pos, q_seg, kv_pos, kv_seg, fwd_mask):
        from kvax._src.attention import blockwise

        return blockwise.forward(q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, fwd_mask,
                                 sequential=opts.sequential,
                                 logits_soft_cap=opts.logits_soft_cap, sinks=sinks)

    def backward(self, opts, q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, out, lse, delta,
                 dout, dq_mask, dkdv_mask, fwd_mask=None):
        from kvax._src.attention import blockwise

        return blockwise.backward(q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, lse, delta,
                                  dout, dq_mask, dkdv_mask, sequential=opts.sequential,
                                  logits_soft_cap=opts.logits_soft_cap)


class TritonBackend(Backend):
    """The Triton kernels (triton_fwd.py, triton_bwd.py): CUDA GPUs."""

    name = "triton"

    def check(self, query, key, value, *, platform: str) -> None:
        if platform != "gpu":
            raise NotImplementedError(
                f"backend={self.name!r} needs a CUDA GPU; JAX's default backend is "
                f"{platform!r}. Use backend='auto' or 'xla' for the pure-JAX path")
        validate.check_head_dims_supported(query, value)

    lowers_backward_ahead = True

    def default_params(self, device_kind: str, *, backward: bool) -> FlashAttentionParamsConfig:
        """Hopper (measured on an H100, docs/bench): forward 128x128, backward 64x128, 8 warps, 3
        stages. Other GPUs: 64x64, 4 warps, 3 stages."""
        if is_hopper(device_kind):
            return FlashAttentionParamsConfig(query_block_size=64 if backward else 128,
                                              kv_block_size=128, num_warps=8, num_stages=3)
        return FlashAttentionParamsConfig()

    def forward(self, opts, q, k, v, scale, sinks, q_pos, q_seg, kv_pos, kv_seg, fwd_mask):
        from kvax._src.attention import triton_fwd

        return triton_fwd.forward(q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, fwd_mask,
                                  sequential=opts.sequential, params=opts.fwd_params,
                                  debug=opts.debug, logits_soft_cap=opts.logits_soft_cap,
                                  sinks=sinks)

    def backward(self, opts, q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, out, lse, delta,
                 dout, dq_mask, dkdv_mask, fwd_mask=None):
        from kvax._src.attention import triton_bwd

        return triton_bwd.backward(q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, lse, delta,
                                   dout, dq_mask, dkdv_mask, sequential=opts.sequential,
                                   params=opts.bwd_params, debug=opts.debug,
                                   logits_soft_cap=opts.logits_soft_cap)


class MosaicBackend(TritonBackend):
    """Hopper: the forward in Pallas Mosaic GPU (mosaic_fwd.py: TMA, warp-specialised producer
    and two ping-ponging consumer warpgroups), the backward too (mosaic_bwd.py, dQ by TMA
    reduce-add: summed in fixed point, bitwise-equal reruns, or with `deterministic=False` in
    float32; head dims 64 and 128 with dK/dV mask blocks of multiples of 128 x 64, and 256 with
    multiples of 64 x 64; other calls keep the deterministic Triton backward). bfloat16/float16,
    head dims 64, 128 and 256 (equal for keys and values), forward mask blocks of multiples of
    128 x 64; other calls fall through to triton."""

    name = "mosaic"
    lowers_backward_ahead = False  # its kernels compile ahead their own way (prewarm.py)

    def check(self, query, key, value, *, platform: str) -> None:
        from kvax._src.attention.mosaic_fwd import MosaicConfig
        from kvax._src.config import current_device_kind

        super().check(query, key, value, platform=platform)
        kind = current_device_kind()
        if not is_hopper(kind):
            raise NotImplementedError(
                f"backend='mosaic' needs a Hopper GPU (H100/H200), got {kind}")
        dtypes = {str(x.dtype) for x in (query, key, value)}
        if not dtypes <= {"bfloat16", "float16"} or len(dtypes) > 1:
            raise NotImplementedError(
                f"backend='mosaic' takes bfloat16 or float16 query, key and value of one dtype, "
                f"got {query.dtype}, {key.dtype}, {value.dtype}")
        rows = MosaicConfig().rows  # queries per program
        if -(-query.shape[1] // rows) > 65535 or query.shape[0] > 65535:  # CUDA's grid limit
            raise NotImplementedError(
                f"backend='mosaic' takes up to 65535 blocks of {rows} queries and 65535 batch "
                f"rows, got query shape {tuple(query.shape)}")
        h, hv = query.shape[-1], value.shape[-1]
        if h != hv or h not in (64, 128, 256):
            raise NotImplementedError(
                f"backend='mosaic' takes head dims 64, 128 or 256, equal for keys and values, got "
                f"query {h}, value {hv}")

    def check_call(self, *, fwd_params: FlashAttentionParamsConfig) -> None:
        from kvax._src.attention import mosaic_fwd

        why = mosaic_fwd.supported((fwd_params.query_block_size, fwd_params.kv_block_size))
        if why:
            raise NotImplementedError(why)

    def forward(self, opts, q, k, v, scale, sinks, q_pos, q_seg, kv_pos, kv_seg, fwd_mask):
        from kvax._src.attention import mosaic_fwd
        from kvax._src.config import PADDING_SEGMENT_ID

        return mosaic_fwd.forward(q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, fwd_mask,
                                  variant=opts.variant, pad_id=PADDING_SEGMENT_ID,
                                  logits_soft_cap=opts.logits_soft_cap, sinks=sinks)

    @staticmethod
    def _mosaic_backward(q, k, v, dkdv_blocks: tuple[int, int]) -> bool:
        """Whether the backward is the Mosaic one (a shape it takes)."""
        from kvax._src.attention import mosaic_bwd

        return mosaic_bwd.supported(q.shape[-1], dkdv_blocks, kv_len=k.shape[1],
                                    value_dim=v.shape[-1]) is None

    def forward_for_grad(self, opts, q, k, v, scale, sinks, q_pos, q_seg, kv_pos, kv_seg,
                         masks):
        """Ahead of the Mosaic backward, the forward's consumers also store the Q tiles they
        loaded with the padding rows zeroed (that backward's products must not meet NaN there),
        in place of a zeroing copy in the backward (0.38 ms a step at 64k x 32 heads)."""
        from kvax._src.attention import mosaic_fwd
        from kvax._src.config import PADDING_SEGMENT_ID

        # the dK/dV mask's (key, query) blocks, as build_masks makes them when the backward
        # builds its masks itself
        blocks = ((masks[2].row_block, masks[2].col_block) if len(masks) > 2 else
                  (opts.bwd_params.kv_block_size, opts.bwd_params.query_block_size))
        if not self._mosaic_backward(q, k, v, blocks):
            return super().forward_for_grad(opts, q, k, v, scale, sinks, q_pos, q_seg, kv_pos,
                                            kv_seg, masks)
        return mosaic_fwd.forward(q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, masks[0],
                                  variant=opts.variant, pad_id=PADDING_SEGMENT_ID,
                                  logits_soft_cap=opts.logits_soft_cap, sinks=sinks,
                                  store_query=True)

    def backward(self, opts, q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, out, lse, delta,
                 dout, dq_mask, dkdv_mask, fwd_mask=None):
        from kvax._src.attention import mosaic_bwd
        from kvax._src.config import PADDING_SEGMENT_ID

        if not self._mosaic_backward(q, k, v, (dkdv_mask.row_block, dkdv_mask.col_block)):
            return super().backward(opts, q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, out,
                                    lse, delta, dout, dq_mask, dkdv_mask)
        config = mosaic_bwd.chosen_config(q.shape[-1])
        # with the rank rule, the layouts the forward mask's schedule brings (built once with the
        # mask; its queries and keys are this call's)
        sched = getattr(fwd_mask, "schedule", None)
        ranks = (tuple(x[:, 0] for x in sched.layouts[:2]) if config.rank_rule
                 and sched is not None and sched.rank_rule and fwd_mask.variant == opts.variant
                 else None)
        # q is forward_for_grad's copy, its padding rows zeroed
        return mosaic_bwd.backward(q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, lse, delta,
                                   dout, dkdv_mask, variant=opts.variant,
                                   pad_id=PADDING_SEGMENT_ID,
                                   logits_soft_cap=opts.logits_soft_cap,
                                   query_padding_zeroed=True,
                                   deterministic=opts.deterministic, ranks=ranks, config=config)


_REGISTRY: dict[str, tuple[int, Backend]] = {}


def register(backend: Backend, *, priority: int) -> None:
    """Add (or replace) a backend; "auto" tries higher priorities first."""
    _REGISTRY[backend.name] = (priority, backend)


def names() -> tuple[str, ...]:
    """Registered backend names, highest priority first, then "auto"."""
    return tuple(sorted(_REGISTRY, key=lambda n: -_REGISTRY[n][0])) + ("auto",)


def check_name(name, argument: str = "backend", *, or_none: bool = False) -> None:
    """A ValueError naming `argument` unless name is a registered backend, "auto", or (with
    or_none) None."""
    if (or_none and name is None) or (isinstance(name, str) and name in names()):
        return
    raise ValueError(f"{argument} must be one of {names()}{' or None' if or_none else ''}, got "
                     f"{name!r}")


def get(name: str) -> Backend:
    if name not in _REGISTRY:
        raise ValueError(f"backend must be one of {names()}, got {name!r}")
    return _REGISTRY[name][1]


def _platform() -> str:
    return jax.default_backend()


def resolve(name: str, query, key, value, *, fwd_params: FlashAttentionParamsConfig) -> str:
    """The backend that runs a call: the one named (NotImplementedError if it cannot), or with
    "auto" the first in priority order that can."""
    def check(backend: Backend) -> None:
        backend.check(query, key, value, platform=_platform())
        backend.check_call(fwd_params=fwd_params)

    if name != "auto":
        check(get(name))
        return name
    reasons = []
    for candidate in names()[:-1]:
        try:
            check(get(candidate))
            return candidate
        except NotImplementedError as err:
            reasons.append(f"{candidate}: {err}")
    raise NotImplementedError("no backend can run this call: " + "; ".join(reasons))


def default_params(device_kind: str, *, backward: bool) -> FlashAttentionParamsConfig:
    """The defaults of the backend "auto" picks on this kind of device (GPUs: triton)."""
    gpu = device_kind != "cpu" and not device_kind.startswith("TPU")
    backend = get("triton") if gpu and "triton" in _REGISTRY else get("xla")
    return backend.default_params(device_kind, backward=backward)


register(MosaicBackend(), priority=20)
register(TritonBackend(), priority=10)
register(XlaBackend(), priority=0)

"""jax.nn-style entry points: dot_product_attention (jax.nn's signature, run by Kvax) and
make_attention_fn (an attention_fn for flax.nnx.MultiHeadAttention)."""

from kvax._src.attention.flax_fn import make_attention_fn
from kvax._src.attention.jax_nn import dot_product_attention

__all__ = ["dot_product_attention", "make_attention_fn"]

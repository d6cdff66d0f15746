"""The gate's small decoder-only transformer, in plain JAX (no framework beyond ``jax`` and ``optax``).

GPT-2's layout (Radford et al. 2019, section 2.3): learned token and position embeddings, pre-norm
blocks of causal multi-head self-attention and a 4x GELU MLP, a final layer norm, and an output layer
tied to the token embedding (Press & Wolf 2017). Initialisation as GPT-2: normal(0, 0.02), residual
output projections scaled by ``1/sqrt(2 * n_layers)``.

Parameters are a plain dict pytree; every function is pure, so one ``jax.jit`` covers a training step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp

INIT_STD = 0.02
"""GPT-2's initialisation standard deviation (``initializer_range``)."""


@dataclass(frozen=True)
class ModelShape:
    """Sizes of one model.

    Attributes:
        vocab: token ids the model predicts (the gate's compact vocabulary).
        seq_len: tokens per training sequence (the context).
        d_model: width of the residual stream.
        n_layers: transformer blocks.
        n_heads: attention heads (``d_model`` must divide by it).
    """

    vocab: int
    seq_len: int
    d_model: int
    n_layers: int
    n_heads: int

    def params(self) -> int:
        """Number of parameters (embeddings included, the output layer is tied)."""
        d = self.d_model
        per_layer = 4 * d * d + 4 * d + 8 * d * d + 5 * d + 4 * d
        return self.vocab * d + self.seq_len * d + self.n_layers * per_layer + 2 * d

    def flops_per_token(self) -> float:
        """Training FLOPs per token: 6 x (matmul parameters) plus attention (Kaplan et al. 2020, table 1;
        ``6 N + 6 n_layers seq_len d_model`` with the output layer counted in N).
        """
        d = self.d_model
        matmul = self.n_layers * 12 * d * d + self.vocab * d
        return 6.0 * matmul + 6.0 * self.n_layers * self.seq_len * d


def init_params(shape: ModelShape, seed: int) -> dict:
    """Draw the initial parameters.

    Args:
        shape: the model sizes.
        seed: the initialisation seed (the same seed gives the same parameters on a machine).

    Returns:
        A dict pytree of float32 arrays.
    """
    d, L = shape.d_model, shape.n_layers
    keys = iter(jax.random.split(jax.random.PRNGKey(seed), 2 + 4 * L))
    resid = INIT_STD / math.sqrt(2 * L)

    def normal(key, dims, std=INIT_STD):
        return (std * jax.random.normal(key, dims)).astype(jnp.float32)

    layers = []
    for _ in range(L):
        layers.append(
            {
                "ln1_g": jnp.ones(d),
                "ln1_b": jnp.zeros(d),
                "qkv": normal(next(keys), (d, 3 * d)),
                "qkv_b": jnp.zeros(3 * d),
                "proj": normal(next(keys), (d, d), resid),
                "proj_b": jnp.zeros(d),
                "ln2_g": jnp.ones(d),
                "ln2_b": jnp.zeros(d),
                "fc": normal(next(keys), (d, 4 * d)),
                "fc_b": jnp.zeros(4 * d),
                "out": normal(next(keys), (4 * d, d), resid),
                "out_b": jnp.zeros(d),
            }
        )
    return {
        "wte": normal(next(keys), (shape.vocab, d)),
        "wpe": normal(next(keys), (shape.seq_len, d), 0.01),
        "layers": layers,
        "lnf_g": jnp.ones(d),
        "lnf_b": jnp.zeros(d),
    }


def _layer_norm(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + eps) * g + b


def _attention(p, x, n_heads):
    B, T, d = x.shape
    hd = d // n_heads
    q, k, v = jnp.split(x @ p["qkv"] + p["qkv_b"], 3, axis=-1)
    q, k, v = (a.reshape(B, T, n_heads, hd).transpose(0, 2, 1, 3) for a in (q, k, v))
    att = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(hd)
    mask = jnp.tril(jnp.ones((T, T), dtype=bool))
    att = jax.nn.softmax(jnp.where(mask, att, -1e9), axis=-1)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, d)
    return y @ p["proj"] + p["proj_b"]


def logits(params: dict, tokens: jax.Array, n_heads: int) -> jax.Array:
    """Next-token logits.

    Args:
        params: from :func:`init_params`.
        tokens: int32 [batch, T] compact ids, ``T <= seq_len``.
        n_heads: attention heads.

    Returns:
        float32 [batch, T, vocab]: the logits of the token after each position.
    """
    T = tokens.shape[1]
    x = params["wte"][tokens] + params["wpe"][:T]
    for p in params["layers"]:
        x = x + _attention(p, _layer_norm(x, p["ln1_g"], p["ln1_b"]), n_heads)
        h = jax.nn.gelu(_layer_norm(x, p["ln2_g"], p["ln2_b"]) @ p["fc"] + p["fc_b"])
        x = x + h @ p["out"] + p["out_b"]
    x = _layer_norm(x, params["lnf_g"], params["lnf_b"])
    return x @ params["wte"].T


def token_nll(params: dict, inputs: jax.Array, targets: jax.Array, n_heads: int) -> jax.Array:
    """Negative log-likelihood of each target token, in nats.

    Args:
        params: model parameters.
        inputs: int32 [batch, T] compact ids.
        targets: int32 [batch, T] the ids that follow each input position.
        n_heads: attention heads.

    Returns:
        float32 [batch, T], ``-ln p(target | inputs up to the position)``.
    """
    # logsumexp minus the target's logit: the same value as -log_softmax at the target, without the
    # [batch, T, vocab] log-probabilities and their gradient (about 7 % of a CPU training step)
    z = logits(params, inputs, n_heads)
    return jax.nn.logsumexp(z, axis=-1) - jnp.take_along_axis(z, targets[..., None], axis=-1)[..., 0]

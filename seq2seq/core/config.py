"""Configuration dataclasses for the Transformer core; one config is handed whole to each
module (nanoGPT style) and validated on construction."""

from __future__ import annotations

from dataclasses import asdict, dataclass

ACTIVATIONS = ("relu", "gelu")
POSITIONALS = ("sinusoidal", "learned", "rotary")


@dataclass
class LayerConfig:
    """One encoder or decoder layer.

    Attributes:
        d_model: model width.
        n_heads: attention heads; ``d_model % n_heads == 0``.
        d_ff: hidden width of the feed-forward block.
        dropout: dropout on residual branches and (unless ``attention_dropout`` is set) on
            attention probabilities, as in ``torch.nn.TransformerEncoderLayer``.
        attention_dropout: dropout on attention probabilities; ``None`` means ``dropout``.
            On CPU, 0 keeps the fused attention kernel and saves most of dropout's cost.
        activation: ``"relu"`` or ``"gelu"``.
        norm_first: pre-norm (True) or post-norm (False, the original Transformer).
        bias: biases in linear layers.
        layer_norm_eps: epsilon of the layer norms.
    """

    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    dropout: float = 0.1
    attention_dropout: float | None = None
    activation: str = "relu"
    norm_first: bool = False
    bias: bool = True
    layer_norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        for name in ("d_model", "n_heads", "d_ff"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads != 0:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {value}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}")
        if self.layer_norm_eps <= 0:
            raise ValueError(f"layer_norm_eps must be positive, got {self.layer_norm_eps}")

    @property
    def attn_dropout(self) -> float:
        return self.dropout if self.attention_dropout is None else self.attention_dropout

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class StackConfig(LayerConfig):
    """A stack of layers (an :class:`Encoder` or :class:`Decoder`).

    Attributes:
        n_layers: number of layers.
        causal: each position attends only to itself and earlier positions (decoders always
            are; an encoder with ``causal=True`` is the forecaster's backbone).
        rotary: apply rotary position embeddings in self-attention.
        max_len: longest sequence the rotary tables cover.
        final_norm: a LayerNorm after the last layer; ``None`` means "when ``norm_first``".
    """

    n_layers: int = 6
    causal: bool = False
    rotary: bool = False
    max_len: int = 1024
    final_norm: bool | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.n_layers, int) or self.n_layers <= 0:
            raise ValueError(f"n_layers must be a positive integer, got {self.n_layers!r}")
        if self.max_len <= 0:
            raise ValueError(f"max_len must be positive, got {self.max_len}")
        if self.rotary and self.head_dim % 2 != 0:
            raise ValueError(f"rotary positions need an even head_dim, got {self.head_dim}")

    @property
    def use_final_norm(self) -> bool:
        return self.norm_first if self.final_norm is None else self.final_norm

"""Which torch calls and aten ops are compute, and which only allocate, view or move data.

Shared by the static (AST) and the dynamic (dispatch trace) hack checks, so that both agree on
what "no PyTorch compute in ModelNew.forward" means.
"""

from __future__ import annotations

# torch.<name>(...) calls a candidate's forward may make: allocation, metadata, context managers.
ALLOWED_TORCH_CALLS = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "tensor", "as_tensor", "from_numpy", "is_tensor", "Size", "device", "dtype",
    "get_default_dtype", "is_grad_enabled", "no_grad", "inference_mode", "finfo", "iinfo",
    "broadcast_shapes", "is_floating_point", "numel", "arange",
    "view_as_real",  # a view: a complex parameter's float pairs (agents/plan/complex_pairs.py)
    # Random draws: the reference's own numbers come from PyTorch's generator, and only the same
    # call reproduces them (agents/random_draws.py); the Verifier seeds both sides alike.
    "randn", "rand", "randint",
}  # fmt: skip

# Tensor methods that compute (a candidate calling these in forward is using PyTorch for the work).
COMPUTE_TENSOR_METHODS = {
    "sum", "mean", "max", "min", "amax", "amin", "prod", "std", "var", "norm", "matmul", "mm",
    "bmm", "addmm", "baddbmm", "addmv", "mv", "dot", "relu", "relu_", "sigmoid", "sigmoid_", "tanh",
    "tanh_", "exp", "exp_", "log", "log_", "softmax", "log_softmax", "clamp", "clamp_", "clip",
    "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "pow", "pow_", "sqrt", "rsqrt",
    "abs", "neg", "gelu", "cumsum", "cumprod", "logcumsumexp", "argmax", "argmin", "sort", "topk", "masked_fill",
    "masked_fill_", "erf", "sin", "cos", "floor", "ceil", "round", "sign", "maximum", "minimum",
    "lerp", "addcmul", "addcdiv", "einsum", "outer", "where", "logsumexp", "square", "reciprocal",
    "hardtanh", "leaky_relu", "silu", "mish", "softplus", "elu", "selu", "conv2d", "linear",
    "index_select", "gather", "scatter", "scatter_add", "unfold", "logical_and", "logical_or", "eq",
    "ne", "gt", "lt", "ge", "le", "all", "any", "count_nonzero", "triu", "tril", "diag", "flip",
    "roll", "repeat", "tile", "repeat_interleave", "cross", "kthvalue", "median", "mode", "nansum",
    "expm1", "log1p", "sinh", "cosh", "atan", "asin", "acos", "trunc", "frac", "fmod", "remainder",
    "numpy", "tolist",  # the values taken to the host to compute there (numpy, Python arithmetic)
    "__array__", "__dlpack__",  # the same, spelled as numpy's protocol (a red-team candidate, 2026-11-30)
    # A Python callable run over every element on the host, by a loop inside torch that dispatches no
    # op (a red-team candidate, 2026-12-06: out.map2_(x, y, lambda o, a, b: ...)).
    "map_", "map2_", "apply_",
    # Its bytes to the host, for Python arithmetic (bytes(t.untyped_storage()): the round's second pass).
    "untyped_storage", "storage", "_typed_storage",
}  # fmt: skip

# aten ops (overload packet names) that are not compute: allocation, views, metadata, copies.
ALLOWED_ATEN = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill_", "zero_",
    "fill", "scalar_tensor", "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided",
    "permute", "transpose", "t", "expand", "unsqueeze", "squeeze", "flatten", "unflatten", "alias",
    "detach", "slice", "select", "narrow", "split", "split_with_sizes", "unbind", "chunk", "clone",
    "copy_", "_to_copy", "to", "lift_fresh", "lift_fresh_copy", "resize_", "set_",
    "_local_scalar_dense", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset",
    "is_contiguous", "contiguous", "view_as_real", "view_as_complex", "diagonal", "movedim",
    "arange", "_has_compatible_shallow_copy_type", "record_stream", "is_same_size", "unfold_copy",
    "expand_copy", "view_copy", "permute_copy", "transpose_copy", "unsqueeze_copy", "squeeze_copy",
    "slice_copy", "select_copy", "detach_", "_pin_memory", "is_pinned", "equal_size",
    "randn", "rand", "randint", "normal_", "uniform_", "random_", "exponential_",  # draws, not arithmetic on inputs
    "native_dropout(ones)",  # DROPOUT_MASK: a dropout mask drawn as eager dropout draws it
    "bernoulli(number p)",  # BERNOULLI_FILL: a feature dropout's or stochastic depth's mask drawn
}  # fmt: skip

# bernoulli / bernoulli_ with a number for p (feature dropout's and stochastic depth's masks): a draw
# over its self's shape that never reads its values; the op recorder files it under this name. The
# profiler names aten::bernoulli_ without its arguments, so the blind check lets those calls through
# only as many as the recorder's fills (blind._judge), as it does dropout masks.
BERNOULLI_FILL = "bernoulli(number p)"
# bernoulli(p) / t.bernoulli_(p) with p a tensor: each element drawn against p's values, which the
# forward computed; the op recorder files it under this name, not one of ALLOWED_ATEN.
BERNOULLI_OF_TENSOR = "bernoulli(tensor p)"

# aten.native_dropout over a tensor of ones: the mask of a training-mode dropout, drawn by the call
# eager PyTorch draws it with (agents/random_draws.py); the recorder files it under this name. Over
# anything else it is dropout computed by PyTorch, and counts as compute.
DROPOUT_MASK = "native_dropout(ones)"

# aten ops that define the tolerance class of a reference (see compare.tolerance_for).
MATMUL_LIKE = {
    "mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "convolution", "_convolution", "conv1d",
    "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "addmv", "mv",
    "dot", "einsum", "cudnn_convolution", "cudnn_convolution_transpose", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
    "scaled_dot_product_attention", "addbmm", "tensordot", "_cudnn_rnn", "lstm", "gru", "rnn_tanh",
    "rnn_relu", "mkldnn_convolution", "mkldnn_rnn_layer", "cumprod", "_linalg_svd",
    "cdist", "_cdist_forward", "bilinear", "_trilinear",
    # Fused fast paths that run their products inside one op (the op recorder sees only the outer
    # one): nn.MultiheadAttention and nn.TransformerEncoderLayer in eval mode without grad, the
    # attention kernels SDPA dispatches to, and the fused epilogue/low-precision products.
    "_native_multi_head_attention", "_transformer_encoder_layer_fwd", "_efficient_attention_forward",
    "_flash_attention_forward", "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_fused_attention_overrideable", "_addmm_activation", "_scaled_mm", "_int_mm",
    "_grouped_mm", "_scaled_grouped_mm",
}  # fmt: skip
REDUCTION_LIKE = {
    "sum", "mean", "amax", "amin", "max", "min", "prod", "std", "var", "var_mean", "std_mean",
    "norm", "_softmax", "_log_softmax", "_safe_softmax", "softmax", "log_softmax", "native_layer_norm",
    "native_group_norm", "native_batch_norm", "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training", "cudnn_batch_norm", "_batch_norm_impl_index",
    "batch_norm", "instance_norm", "logsumexp", "logcumsumexp", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices", "max_pool3d_with_indices",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "_adaptive_avg_pool2d",
    "_adaptive_avg_pool3d", "adaptive_max_pool2d", "mse_loss", "nll_loss", "nll_loss_forward",
    "nll_loss2d_forward", "smooth_l1_loss", "huber_loss", "kl_div", "binary_cross_entropy",
    "cross_entropy_loss", "cosine_similarity", "argmax", "argmin", "linalg_vector_norm", "frobenius_norm",
    "_fused_rms_norm", "rms_norm", "cummax", "cummin", "sort", "topk", "median", "all", "any",
    # (a sum's and a norm's rounding, no product's: in MATMUL_LIKE until 2026-12-06, whose 1e-2 let
    # a cumsum that read only the even elements pass at 2.4e-3)
    "cumsum",
    "triplet_margin_loss", "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
}  # fmt: skip


def is_compute_aten(name: str) -> bool:
    return name not in ALLOWED_ATEN

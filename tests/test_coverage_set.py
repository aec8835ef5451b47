"""Every module of bench/coverage (blocks, layers and losses of current networks, as users write
them) plans with the built-in coder, but those listed here with the reason they do not yet."""

from __future__ import annotations

from pathlib import Path

import pytest

from stitchcuda.agents.plan import planner
from stitchcuda.types import Task

FOLDER = Path(__file__).resolve().parent.parent / "bench" / "coverage"
NOT_YET = {
    "moe_top2.py": "nonzero",  # token dispatch by torch.where(idx == e): data-dependent shapes
    "hyena_fftconv.py": "_fft_r2c",  # torch.fft.rfft long convolution
    "ctc_asr_head_loss.py": "_ctc_loss",  # CTC's dynamic program (its trace needs target lengths' values)
    # The fourth sweep's (2026-11-30) that do not plan yet: shapes that depend on values, running
    # extremes and histograms, linear algebra, sparse tensors and rarer ops.
    "bilstm_packed_tagger.py": "_pack_padded_sequence",
    "builtin_losses_classification.py": "multi_margin_loss",
    "builtin_losses_regression.py": "_local_scalar_dense",  # F.gaussian_nll_loss's check of its variances
    "class_balanced_focal_bincount.py": "bincount",
    "data_dependent_shapes.py": "nonzero",
    "dropout_embedding_train.py": "bernoulli",  # of a probability tensor; and Embedding's max_norm
    "dynamic_maxlen_item.py": "_local_scalar_dense",
    "gcn_sparse_spmm.py": "_sparse_coo_tensor_with_dims_and_tensors",
    "glow_actnorm_inv1x1.py": "_linalg_slogdet",
    "gp_cholesky_nll.py": "linalg_cholesky_ex",
    "graphsage_mean_bincount.py": "bincount",
    "ntxent_simclr_loss.py": "nonzero",  # sim[mask] with a mask of shapes only
    "order_stats_zoo.py": "mode",  # torch.mode of int64 votes
    "pooling_zoo.py": "fractional_max_pool2d",
    "special_math_products.py": "block_diag",
    "universal_transformer_act.py": "_local_scalar_dense",  # a while loop on tensor values
    "zca_whitening_eigh.py": "_linalg_eigh",
    # The sixth's (2026-12-04): FFTs, and derivatives taken inside forward.
    "fno2d_spectral_conv.py": "_fft_r2c",
    "gfnet_global_filter.py": "_fft_r2c",
    "pinn_burgers_autograd.py": "derivatives inside forward",
}
FILES = sorted(p.name for p in FOLDER.glob("*.py"))


def test_the_set_is_there():
    assert len(FILES) >= 258 and set(NOT_YET) <= set(FILES)


@pytest.mark.parametrize("name", FILES)
def test_it_plans(name):
    plan = planner.plan(Task(FOLDER / name))
    if name in NOT_YET:
        reason = "; ".join(plan.unsupported)
        if plan.supported:
            pytest.fail(f"{name} plans now: take it off NOT_YET")
        assert NOT_YET[name] in reason, reason
        return
    assert plan.supported, plan.unsupported

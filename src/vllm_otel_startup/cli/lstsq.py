"""The predictor's least squares through numpy where numpy is installed (it is wherever vLLM is), else the
standard-library solver of ``model/predict.py`` (the model layer imports no third-party package: the agent prints
it at ready). Both solve the same ridge normal equations, (XᵀX + ridge·n·I) c = Xᵀy: numpy by LAPACK's LU with
partial pivoting, ours by Gauss-Jordan; tests/unit/cli/test_lstsq.py holds them to the same coefficients."""

from __future__ import annotations

from vllm_otel_startup.model.predict import RIDGE, Solver, least_squares


def numpy_least_squares(xs: list[list[float]], ys: list[float], ridge: float = RIDGE) -> list[float]:
    import numpy as np

    x = np.asarray(xs, dtype=float).reshape(len(xs), -1)
    k = x.shape[1]
    if k == 0:
        return []
    ata = x.T @ x + ridge * len(xs) * np.eye(k)
    aty = x.T @ np.asarray(ys, dtype=float)
    try:
        return [float(c) for c in np.linalg.solve(ata, aty)]
    except np.linalg.LinAlgError:  # singular only with ridge 0: the standard-library path zeroes such a feature
        return least_squares(xs, ys, ridge)


def solver() -> Solver:
    """numpy's solver when numpy imports, else the standard library's."""
    try:
        import numpy  # noqa: F401 - only whether it is there
    except ImportError:
        return least_squares
    return numpy_least_squares

"""Every eigenvalue, or a count that pins the spectral radius, of the VR round (SCAFFOLD,
FedNova-VR) linearised at the optimum of Synthetic(1,1): the spectrum behind chapter 10, part 6.

The chapter finds the leading eigenvalues by Arnoldi and those nearest 1 by shift-invert in
seconds; neither bounds FedNova-VR's spectral radius from above (hundreds of eigenvalues crowd
next to 1). Two ways to do it here, both writing into ``--out`` (default
``data/results/linearised/``) with provenance:

* ``--method contour`` (the default): the eigenvalue nearest 1, lambda_1, by shift-invert, then
  ``fedlib.theory.quadratic_vr_count_outside`` counts the eigenvalues outside the circle of radius
  |lambda_1| + slack (1 - |lambda_1|) (``--slack``, default 1e-3) and outside every ``--radius``
  given: the argument principle on a 2d x 2d determinant, one O(m d^3) matrix product per point of
  the circle. None outside that first circle puts the spectral radius between |lambda_1| and it.
  Writes ``<name>-count.json`` (kind ``linearised-count``) for
  ``fedlib.experiments.acceleration.read_vr_count``.
* ``--method dense``: forms the operator ``fedlib.theory.quadratic_vr_round_operator`` (17,019 rows
  for the chapter's problem: 549 non-flat directions x (1 + 30 clients)) as a dense matrix and
  asks LAPACK for all its eigenvalues: about 2.3 GB, formed in 31 s; the eigenvalues did not come
  within 2 h 15 min on 2 cores here (a 4,743-row matrix of the same structure takes 44 s on one
  core: the cost grows as rows cubed, and worse once the matrix leaves the caches), so run it on a
  many-core machine. Writes ``<name>.npz`` (the eigenvalues) and ``<name>.json`` (kind
  ``linearised-spectrum``) for ``fedlib.experiments.acceleration.read_vr_spectrum``.

    python scripts/vr_spectrum.py --algorithms fednova-vr     # the count behind chapter 10
    python scripts/vr_spectrum.py --algorithms scaffold --radius 1.0
    python scripts/vr_spectrum.py --algorithms scaffold --steps equal   # part 5's controls (SCAFFOLD only)
    python scripts/vr_spectrum.py --algorithms scaffold --steps capped
    python scripts/vr_spectrum.py --method dense               # every eigenvalue (hours)
    python scripts/vr_spectrum.py --lr 0.005 --out /tmp/lr0.005   # for chapter 10 run with synthetic_lrs=[0.005]
    python scripts/vr_spectrum.py --smoke --out /tmp/s          # a 3-client problem in seconds
"""
from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

import numpy as np

from fedlib._io import atomic_write
from fedlib.experiments import acceleration as A
from fedlib.results import make_provenance, make_result, write_result


#: Each count is made at these phase steps (radians) and must agree.
PHASE_STEPS = (0.8, 0.4)


#: How each ``--steps`` setting is described in the records (``fedlib.experiments.acceleration.vr_step_settings``).
STEP_SETTINGS = {"e2": "E = 2, batch 20", "equal": "every client the median of E = 2's steps",
                 "capped": "E = 2, batch 20, the largest client capped at {cap} steps"}


def chapter_problem(lr: float, steps: str = "e2", cap: int = 40):
    """Chapter 10, parts 5 and 6: Synthetic(1,1), 30 clients, local GD at ``lr`` with part 5's local steps
    ``steps`` (E = 2 epochs of batch 20, or one of its two controls)."""
    from fedlib.experiments.synthetic import make_problem

    problem = make_problem()
    local_steps = A.vr_step_settings(problem.num_samples, problem.p, cap=cap)[steps]
    return problem, local_steps, lr, "Synthetic(1,1), data seed 0, " + STEP_SETTINGS[steps].format(cap=cap)


def smoke_problem():
    """Chapter 10's small Synthetic(0,0) problem: 3 clients, d = 5, 3 classes (seconds)."""
    from fedlib.data import synthetic
    from fedlib.problems.logistic import LogisticProblem

    problem = LogisticProblem(synthetic(0, 0, num_clients=3, dim=5, num_classes=3, num_samples=[300, 500, 900], seed=1))
    return problem, np.array([2, 4, 40]), 1.0, "Synthetic(0,0), 3 clients (smoke test)"


def write_dense(problem, optimum, name: str, lr: float, steps, setting: str, out: Path) -> None:
    """Every eigenvalue by LAPACK: ``<name>.npz`` and ``<name>.json``."""
    started = time.time()
    M = A.linearised_vr_matrix(problem, optimum, name, lr, steps)
    formed = time.time()
    print(f"{name}: matrix {M.shape[0]} x {M.shape[1]} formed in {formed - started:.1f} s; eigenvalues ...", flush=True)
    vals = np.linalg.eigvals(M)
    del M
    finished = time.time()
    summary = A.spectrum_summary(vals)
    print(f"{name}: eigenvalues in {finished - formed:.0f} s; radius {summary['radius']:.10f}", flush=True)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, eigenvalues=vals)
    atomic_write(out / f"{name}.npz", buffer.getvalue())
    config = {"algorithm": name, "lr": lr, "local_steps": np.asarray(steps).tolist(), "problem": setting,
              "rows": int(vals.size), "method": "dense"}
    summary |= {"matrix_seconds": round(formed - started, 3), "eigvals_seconds": round(finished - formed, 3)}
    write_result(out / f"{name}.json", make_result(config, None, make_provenance(started, finished),
                                                     kind="linearised-spectrum", summary=summary))


def write_count(problem, optimum, name: str, lr: float, steps, setting: str, out: Path, slack: float,
                radii: list[float], progress: bool, steps_name: str = "e2") -> None:
    """The eigenvalue nearest 1 and the counts outside the circles, for the local-step setting ``steps_name``:
    ``A.vr_count_path(out, name, steps_name)``."""
    started = time.time()
    nearest = complex(A.linearised_vr_eigenvalues(problem, optimum, name, lr, steps, k=1, near=1.0)[0])
    first = abs(nearest) + slack * (1 - abs(nearest))
    print(f"{name}: eigenvalue nearest 1 {nearest:.10f} in {time.time() - started:.1f} s; counting outside "
          f"|sigma| = {first:.10f}" + (f" and {radii}" if radii else ""), flush=True)
    counts = []
    for radius in [first, *radii]:
        passes = []  # the same count at every phase step: no turn skipped
        for phase_step in PHASE_STEPS:
            t0 = time.time()
            c = A.linearised_vr_count_outside(problem, optimum, name, lr, steps, radius, max_phase_step=phase_step,
                                              progress=progress)
            passes.append((c, round(time.time() - t0, 3)))
            print(f"{name}: {c.outside} of {c.rows} eigenvalues outside |sigma| = {c.radius:.10f} "
                  f"(phase steps <= {phase_step}: {c.evaluations} determinants, {passes[-1][1]:.0f} s)", flush=True)
        if len({c.outside for c, _ in passes}) > 1:
            raise SystemExit(f"{name}: the count at |sigma| = {radius} changed with the phase step "
                             f"({[c.outside for c, _ in passes]} at {list(PHASE_STEPS)}); lower it further")
        c = passes[0][0]
        counts.append({"radius": c.radius, "outside": c.outside, "inside": c.inside,
                       "evaluations": [c.evaluations for c, _ in passes], "seconds": [t for _, t in passes]})
    finished = time.time()
    config = {"algorithm": name, "lr": lr, "steps": steps_name, "local_steps": np.asarray(steps).tolist(),
              "problem": setting, "rows": counts[0]["outside"] + counts[0]["inside"], "method": "contour",
              "slack": slack, "deflate": "gradient-descent", "max_phase_step": list(PHASE_STEPS)}
    summary = {"nearest_one": [nearest.real, nearest.imag], "counts": counts,
               "radius_bounds": [abs(nearest), first] if counts[0]["outside"] == 0 else None}
    record = make_result(config, None, make_provenance(started, finished), kind="linearised-count", summary=summary)
    write_result(A.vr_count_path(out, name, steps_name), record)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algorithms", nargs="+", default=["fednova-vr", "scaffold"],
                        choices=["scaffold", "fednova-vr"])
    parser.add_argument("--method", choices=["contour", "dense"], default="contour",
                        help="contour: count the eigenvalues outside circles (default); dense: all of them by LAPACK")
    parser.add_argument("--lr", type=float, default=0.02,
                        help="client learning rate (default 0.02: chapter 10's synthetic_lrs[-1] in both profiles)")
    parser.add_argument("--steps", choices=list(A.VR_STEP_SETTINGS), default="e2",
                        help="contour: part 5's local steps: e2 (E = 2, the default), or its controls equal (every "
                             "client the median) and capped (the largest client stopped after --cap steps); a "
                             "setting other than e2 writes <algorithm>-<steps>-count.json")
    parser.add_argument("--cap", type=int, default=None,
                        help="with --steps capped: the largest client's steps (default 40, chapter 10's big_cap)")
    parser.add_argument("--slack", type=float, default=1e-3,
                        help="contour: the first circle's radius is |l1| + slack (1 - |l1|), l1 the eigenvalue "
                             "nearest 1 (default 1e-3)")
    parser.add_argument("--radius", type=float, action="append", default=[],
                        help="contour: also count outside this radius (repeatable)")
    parser.add_argument("--out", type=Path, default=Path("data/results/linearised"))
    parser.add_argument("--smoke", action="store_true", help="a 3-client Synthetic(0,0) problem (seconds)")
    parser.add_argument("--progress", action="store_true", help="contour: a progress bar per circle")
    args = parser.parse_args(argv)
    if not (args.lr > 0 and np.isfinite(args.lr)):
        parser.error(f"--lr must be a finite number > 0, got {args.lr}")
    if not (0 < args.slack < 1):
        parser.error(f"--slack must lie strictly between 0 and 1, got {args.slack}")
    if any(not (r > 0 and np.isfinite(r)) for r in args.radius):
        parser.error(f"--radius must be finite numbers > 0, got {args.radius}")
    if args.method == "dense" and (args.radius or args.slack != 1e-3 or args.progress):
        parser.error("--radius, --slack and --progress go with --method contour")
    if args.cap is not None and args.steps != "capped":
        parser.error("--cap goes with --steps capped")
    if args.cap is not None and args.cap < 1:
        parser.error(f"--cap must be a whole number >= 1, got {args.cap}")
    if args.method == "dense" and args.steps != "e2":
        parser.error("--steps goes with --method contour")
    if args.smoke and args.steps != "e2":
        parser.error("--smoke runs the 3-client problem at its own local steps (2, 4, 40); drop --steps")
    if args.smoke and args.lr != 0.02:
        parser.error("--smoke runs the 3-client problem at its own lr 1.0; drop --lr")
    if args.out.exists() and not args.out.is_dir():  # was a FileExistsError after the optimum was computed
        parser.error(f"--out {args.out}: is a file; give the folder to write the results into")
    try:  # before the optimum is computed: a folder that cannot be made was a traceback after it
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        parser.error(f"--out {args.out}: cannot make the folder ({exc.strerror or exc})")
    problem, steps, lr, setting = (smoke_problem() if args.smoke
                                   else chapter_problem(args.lr, args.steps, 40 if args.cap is None else args.cap))
    t0 = time.perf_counter()
    optimum = A.logistic_optimum(problem)
    print(f"x*: {optimum.newton_steps} Newton steps in {time.perf_counter() - t0:.1f} s; "
          f"{optimum.basis.shape[1]} non-flat directions", flush=True)
    for name in args.algorithms:
        if args.method == "dense":
            write_dense(problem, optimum, name, lr, steps, setting, args.out)
        else:
            write_count(problem, optimum, name, lr, steps, setting, args.out, args.slack, args.radius, args.progress,
                        args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The calibrated world: the simulator with a machine profile (`machine.profile`), the model
of what `schedlab calibrate` measured on a real system. Beside the simulator's ideal model
(`sim`) and the real system, it is the third line of an experiment
(`world = ["sim", "calibrated", "server"]`).

It reads every key as the simulator does, except `profile`, which it needs: a file written by
`schedlab calibrate`, or `"calibrate"` to measure the experiment's real world first (the
runner calibrates the server, or real processes, as this file configures them, once per
configuration, writes `profile-server.toml` or `profile-os-cpus2.toml` in the results
directory, `-kernel` or `-dispatcher` in its name when the runs read one part of it, and
models that). The simulator world leaves the profile out (its ideal model).
With a profile it keeps what the profile reads at the run: the server's cost and packets, and
for real processes `enforce` and, for the kernel's own policies, `sched`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from schedlab import profile
from schedlab.worlds import Translation, maps
from schedlab.worlds import sim as simulator

if TYPE_CHECKING:
    from schedlab.results import Result

CALIBRATE = profile.CALIBRATE
NO_PROFILE = ("a machine profile: machine.profile = FILE (written by schedlab calibrate) or "
              "\"calibrate\" (measure the real world first: the server, or real processes)")


def _profile(t: Translation, key: str) -> None:
    """Kept, with the server keys it reads, until the run: the simulator applies it then
    (a profile still to be measured has no file yet). A file is read now, for its notes."""
    value = t.spec[key]
    if value == CALIBRATE:
        t.note(key, value, "the real world as configured here is calibrated before the runs "
               "(profile-server.toml or profile-os-cpusN.toml in the results directory)")
        return
    if isinstance(value, str) and not value.strip():  # Path("") would read as "."
        from schedlab.vocabulary import quoted, spec_error

        raise spec_error(t.path(key), quoted(value), NO_PROFILE)
    path = Path(value)
    if t.base_dir is not None and not path.is_absolute():
        path = t.base_dir / path
    t.spec[key] = str(path)
    _spec, notes = profile.apply(dict(t.spec), None, t.path(key))
    for n in notes:
        t.note(key, value, n)


def _pending(t: Translation, key: str) -> None:
    """A server key: kept for the profile, which reads it at the run; dropped as the
    simulator drops it when there is no profile."""
    if "profile" not in t.spec:
        t.drop(key, getattr(simulator.KEYS[key], "note", None))


def _policy(t: Translation, key: str) -> None:
    """As the simulator models it; a kernel policy keeps its `sched` for an os profile."""
    kernel = t.policy_is_kernel() and "profile" in t.spec
    scheds = simulator.kernel_scheds(t.spec)
    simulator.KEYS[key].how(t, key)
    if kernel and t.skip is None:
        (t.spec["sched"],) = scheds  # the simulator refuses a run of several


# The keys a profile reads at the run (they leave the spec when it is applied).
PENDING_KEYS = frozenset(profile.SERVER_KEYS + profile.OS_KEYS)
KEYS = {**simulator.KEYS, "policy": maps(_policy), "profile": maps(_profile),
        **{k: maps(_pending) for k in PENDING_KEYS}}
CLASS_KEYS = simulator.CLASS_KEYS
NATIVE_KEYS = simulator.NATIVE_KEYS
NATIVE_CLASS_KEYS = simulator.NATIVE_CLASS_KEYS


def needs_calibration(spec: dict[str, Any]) -> bool:
    return spec.get("profile") == CALIBRATE


def _core_spec(spec: dict[str, Any]) -> dict[str, Any]:
    if spec.get("profile") is None:
        from schedlab.vocabulary import spec_error

        raise spec_error("profile", "(missing)", NO_PROFILE)
    if needs_calibration(spec):
        # Checked as the ideal model until the profile exists.
        return {k: v for k, v in spec.items() if k != "profile" and k not in PENDING_KEYS}
    # The file's machine keys that the profile measured are the ideal model's (the
    # translation's notes say so): the profile's values replace them.
    replaced = profile.replaced(spec)
    return {k: v for k, v in spec.items() if k not in replaced}


def warmup(spec: dict[str, Any]) -> int:
    """The automatic warm-up of a run, from pilot runs of the model (before a profile still to
    be measured exists: of the ideal model, whose transient is the same to within its costs)."""
    return simulator.warmup(_core_spec(spec))


def validate(spec: dict[str, Any]) -> dict[str, Any]:
    return simulator.validate(_core_spec(spec))


def run(spec: dict[str, Any]) -> Result:
    if needs_calibration(spec):
        from schedlab.vocabulary import spec_error

        raise spec_error("profile", CALIBRATE, "a profile file: the runner measures it first "
                         "(schedlab run), a run alone cannot")
    result = simulator.run(_core_spec(spec))
    result.summary["world"] = "calibrated"
    return result

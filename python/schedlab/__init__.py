"""schedlab: a laboratory for scheduling policies.

    import schedlab
    r = schedlab.simulate(policy="rr", quantum=10, arrival="exp:21", size="det:20", jobs=200_000)
    r.summary["response_mean"], r.jobs.head()
"""

from schedlab import policies, theory
from schedlab._core import SpecError
from schedlab.api import load_results, run, simulate, validate
from schedlab.results import Result

__all__ = ["simulate", "validate", "run", "load_results", "policies", "theory", "Result",
           "SpecError"]
__version__ = "0.1.0"

"""A whole SimPy process for bench/mm1.py: the textbook M/M/1 at load 0.9 (a source process,
one process per customer, a Resource), N jobs, printing the mean response.

    python simpy_mm1.py N
"""

import random
import statistics
import sys

import simpy

LOAD, MEAN_SIZE = 0.9, 1.0


def main() -> None:
    jobs = int(sys.argv[1])
    rng = random.Random(1)
    env = simpy.Environment()
    server = simpy.Resource(env, capacity=1)
    responses: list[float] = []

    def customer(env: simpy.Environment):
        arrival = env.now
        with server.request() as req:
            yield req
            yield env.timeout(rng.expovariate(1.0 / MEAN_SIZE))
        responses.append(env.now - arrival)

    def source(env: simpy.Environment):
        for _ in range(jobs):
            yield env.timeout(rng.expovariate(LOAD / MEAN_SIZE))
            env.process(customer(env))

    env.process(source(env))
    env.run()
    print(len(responses), statistics.fmean(responses))


if __name__ == "__main__":
    main()

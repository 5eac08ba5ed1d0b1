"""The Python peer for the verifier benchmark: the same verdicts with PyPI geographiclib
(Geodesic.WGS84.Inverse) and a dict registry. Prints one JSON object per registry size."""
import json
import random
import sys
import time
from urllib.parse import urlsplit

from geographiclib.geodesic import Geodesic


def measure(tags, verdicts, rounds):
    rng = random.Random(42)
    registry = {}
    for index in range(tags):
        registry[f"T{index}"] = (53.5 + rng.random() * 0.09, 9.9 + rng.random() * 0.15, 25.0)
    rng = random.Random(7)
    inputs = []
    for _ in range(verdicts):
        tag = f"T{rng.randrange(tags)}"
        lat, lon, _ = registry[tag]
        inputs.append((f"https://tags.example.org/t/{tag}", lat + (rng.random() - 0.5) * 0.0004, lon + (rng.random() - 0.5) * 0.0006, 4.0))
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        confirmed = 0
        for url, lat, lon, accuracy in inputs:
            tag = urlsplit(url).path.rstrip("/").split("/")[-1]
            clat, clon, radius = registry[tag]
            distance = Geodesic.WGS84.Inverse(clat, clon, lat, lon)["s12"]
            if distance + accuracy <= radius:
                confirmed += 1
        rates.append(len(inputs) / (time.perf_counter() - start))
    rates.sort()
    return {"tags": tags, "verdicts_per_second_median": rates[len(rates) // 2], "verdicts_per_second_min": rates[0], "verdicts_per_second_max": rates[-1]}


if __name__ == "__main__":
    sizes = [int(a) for a in sys.argv[1:]] or [1000, 100000, 1000000]
    for size in sizes:
        print(json.dumps(measure(size, 20000, 3)))

"""Where each hot function goes in the binary, so hot code shares cache lines and pages.

`functions`: the hot functions (run by some training workload), in the linker's order, each
{"name", "size" (bytes), "section", "instructions" (self instruction count)}.
`calls`: {"caller", "callee", "count"} between them, summed over the training workloads.
Return every hot function's name exactly once; cold code keeps the linker's order after
them. The score is I1 misses (16 KiB simulated I1) relative to the linker's own order.
"""

# EVOLVE-BLOCK-START
DENSITY_POWER = 1.0  # @knob float 0.0..2.0
FANOUT = 2  # @knob int 0..8
DEPTH = 2  # @knob int 0..6
MIN_CALL_PPM = 10000  # @knob int 100..500000 log


def order(functions: list[dict], calls: list[dict]) -> list[str]:
    """Hottest per byte first; after each function, its heaviest callees (a short chain,
    edges of at least MIN_CALL_PPM per million of all calls), so a caller and what it
    calls land in the same lines and pages."""
    heat = {f["name"]: f["instructions"] for f in functions}
    size = {f["name"]: max(f["size"], 1) for f in functions}
    callees: dict[str, list[tuple[int, str]]] = {}
    for call in calls:
        callees.setdefault(call["caller"], []).append((call["count"], call["callee"]))
    total_calls = sum(call["count"] for call in calls) or 1

    placed: list[str] = []
    seen: set[str] = set()

    def place(name: str, depth: int) -> None:
        if name in seen:
            return
        seen.add(name)
        placed.append(name)
        if depth >= DEPTH:
            return
        heavy = sorted(callees.get(name, ()), reverse=True)[:FANOUT]
        for count, callee in heavy:
            if count / total_calls * 1e6 >= MIN_CALL_PPM:
                place(callee, depth + 1)

    ranked = sorted(heat, key=lambda n: heat[n] / size[n] ** DENSITY_POWER, reverse=True)
    for name in ranked:
        place(name, 0)
    return placed


# EVOLVE-BLOCK-END

"""The judge of tasks/command_wordfreq, run outside the sandbox on the run's top.txt.

The list must be the corpus's top 20 exactly: `COUNT WORD` on each line (blank lines
aside), in order. EXPECTED is what `python3 gen_corpus.py --top` prints. A right list is
scored on the sandbox's own `run_wall_s`, so check returns `correct` alone: the numbers the
run printed are the candidate's claims, and none of them is scored.
"""

EXPECTED = [
    (71792, "sa"),
    (62914, "s"),
    (13587, "nesaqu"),
    (9178, "ju"),
    (7166, "risa"),
    (5794, "ritaju"),
    (5050, "teneju"),
    (4249, "tariteru"),
    (4014, "ta"),
    (3565, "tequtesa"),
    (3406, "hobelovi"),
    (3003, "du"),
    (2884, "lote"),
    (2696, "so"),
    (2503, "vi"),
    (2320, "jusaka"),
    (2284, "givitelo"),
    (2204, "viju"),
    (2099, "viso"),
    (2009, "mivisa"),
]


def check(outputs: dict[str, bytes], metrics: dict[str, float]) -> dict[str, float]:
    data = outputs.get("top.txt")
    if data is None:
        raise ValueError("the run wrote no top.txt")
    found = []
    for number, line in enumerate(data.decode(errors="replace").splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not parts[0].isdigit():
            raise ValueError(f"top.txt line {number} is not `COUNT WORD`: {line[:80]!r}")
        found.append((int(parts[0]), parts[1]))
    for rank, (want, got) in enumerate(zip(EXPECTED, found, strict=False), start=1):
        if want != got:
            raise ValueError(f"rank {rank}: expected {want[0]} {want[1]}, found {got[0]} {got[1]}")
    if len(found) != len(EXPECTED):
        raise ValueError(f"top.txt lists {len(found)} words, not {len(EXPECTED)}")
    return {"correct": 1.0}

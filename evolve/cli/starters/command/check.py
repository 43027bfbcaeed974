"""The trusted judge, run outside the sandbox on the file the run wrote. The count is the
only thing believed; the time that scores comes from the sandbox, not from the program."""

PRIMES_BELOW_3_MILLION = 216816


def check(outputs: dict[str, bytes], metrics: dict[str, float]) -> dict[str, float]:
    text = outputs.get("count.txt", b"").decode(errors="replace").strip()
    if text != str(PRIMES_BELOW_3_MILLION):
        raise ValueError(f"counted {text or 'nothing'}, not {PRIMES_BELOW_3_MILLION}")
    return {"correct": 1.0}

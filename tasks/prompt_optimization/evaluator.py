"""Scores a support assistant's system prompt against a fixed set of customer messages.

The assistant is simulated by deterministic rules (toy_assistant below) that follow the
instructions a prompt gives, the way an instruction-tuned model would, so the task needs
no model and scores the same every time. GEPA's optimize_anything evolves text like this
against a real model; the rubric is the part a user writes either way.
"""

import json
import re

CASES = [
    ("A1001", "delay", "Where is my parcel? It is a week late."),
    ("A1002", "refund", "I want my money back for these shoes."),
    ("A1003", "damaged", "The vase arrived in pieces."),
    ("A1004", "delay", "My order still has not shipped."),
    ("A1005", "refund", "Can I return this jacket?"),
    ("A1006", "damaged", "The screen of the tablet is cracked."),
    ("A1007", "delay", "The tracking page has not moved for days."),
    ("A1008", "refund", "You charged me twice."),
]
MAX_WORDS = 40  # the support widget shows this many words at most


def instructions(path):
    """The prompt as the assistant sees it: comments and knob annotations removed."""
    kept = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            text = line.split(" # ", 1)[0].strip()
            if text and not text.startswith("#"):
                kept.append(text)
    return " ".join(kept)


def toy_assistant(prompt, order, topic, message):
    """What a model told `prompt` answers: each rule is an instruction it follows."""
    lower = prompt.lower()
    parts = []
    if "apologise" in lower and topic == "delay":
        parts.append("We are sorry for the delay.")
    if "escalate damaged" in lower and topic == "damaged":
        parts.append("A colleague will contact you about the damage today.")
    elif topic == "refund" and "never promise a refund" not in lower:
        parts.append("We will refund you in full.")
    else:
        parts.append("We are looking into it.")
    if "quote the order number" in lower or '"order"' in lower:
        parts.append(f"Your order is {order}.")
    if "in detail" in lower or "concise" not in lower:
        parts.append(
            f"You wrote: {message} Our team reads every message and replies within two "
            "working days, and the help pages at the bottom of every page of the shop "
            "answer most questions about orders, returns and delivery."
        )
    reply = " ".join(parts)
    if "json" in lower:
        return json.dumps({"order": order if '"order"' in lower else None, "reply": reply})
    if "bulleted" in lower:
        return "\n".join(f"- {p}" for p in parts)
    return reply


def grade(answer, order, topic):
    """The rubric: a dict of check -> passed, for one reply."""
    try:
        parsed = json.loads(answer)
    except ValueError:
        parsed = None
    text = parsed.get("reply", "") if isinstance(parsed, dict) else answer
    return {
        "machine_readable": isinstance(parsed, dict) and parsed.get("order") == order,
        "no_refund_promise": "refund you" not in text,
        "damage_escalated": topic != "damaged" or "colleague will contact" in text,
        "delay_apology": topic != "delay" or "sorry" in text,
        "short": len(re.findall(r"\S+", text)) <= MAX_WORDS,
    }


def evaluate(program_path):
    prompt = instructions(program_path)
    totals = {}
    failures = []
    for order, topic, message in CASES:
        checks = grade(toy_assistant(prompt, order, topic, message), order, topic)
        for name, passed in checks.items():
            totals[name] = totals.get(name, 0) + passed
        failures += [f"{order} ({topic}): {name}" for name, ok in checks.items() if not ok]
    rubric = sum(totals.values()) / (len(CASES) * len(totals))
    words = len(prompt.split())
    return {
        "combined_score": rubric - 0.002 * words,  # shorter prompts win ties
        "rubric": rubric,
        "prompt_words": words,
        **{f"pass_{name}": count / len(CASES) for name, count in totals.items()},
        "failed_checks": "\n".join(failures[:12]) or "none",
    }

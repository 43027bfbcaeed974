"""The harness the evaluator writes from a task's `signature:`, and the header that holds the
prototype.

Written by the evaluator, so trusted: the task's author gives only the prototype, and the
glue a hand-written harness holds (sizes from argv, each array at its offset, the casts) cannot
be got wrong. The same header is forced into the candidate's compile (`-include`), so a
definition whose types differ from the prototype fails to build with the compiler's
"conflicting types" instead of reading the wrong bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evolve.evaluators.c_kernel.signature import Signature

HEADER = "evolve_signature.h"
HARNESS = "harness.c"


@dataclass(frozen=True)
class Harness:
    """The trusted C linked with the candidate: harness.c, and the prototype's header when
    the harness was generated (the candidate is then compiled with it included)."""

    source: str
    header: str | None = None

    def files(self) -> dict[str, bytes]:
        """What the link needs beside the driver."""
        return {HARNESS: self.source.encode(), **self.candidate_files()}

    def candidate_files(self) -> dict[str, bytes]:
        """What the candidate's compile needs beside its own files."""
        return {} if self.header is None else {HEADER: self.header.encode()}

    def candidate_flags(self) -> tuple[str, ...]:
        return () if self.header is None else ("-include", HEADER)


def header(signature: Signature) -> str:
    return (
        "/* Written by the c_kernel evaluator from the task's `signature:`. */\n"
        "#ifndef EVOLVE_SIGNATURE_H\n#define EVOLVE_SIGNATURE_H\n"
        "#include <stddef.h>\n#include <stdint.h>\n\n"
        f"{signature.text};\n\n#endif\n"
    )


def generate(signature: Signature, inputs: Sequence[str], outputs: Sequence[str]) -> Harness:
    """The harness for `signature`, whose pointer parameters are among `inputs` and
    `outputs` (names, in buffer order) and whose scalars are sizes (signature.check)."""
    scalars = [p.name for p in signature.parameters if not p.pointer]
    arguments = []
    for parameter in signature.parameters:
        if not parameter.pointer:
            value = f"size_{parameter.name}"
        elif parameter.name in inputs:
            value = f"evolve_input(inputs, {list(inputs).index(parameter.name)})"
        else:
            value = f"evolve_output(output, {list(outputs).index(parameter.name)})"
        arguments.append(f"({parameter.declared}){value}")
    setup = (
        "".join(f'  size_{name} = evolve_size(argc, argv, "{name}");\n' for name in scalars)
        or "  (void)argc;\n  (void)argv;\n"
    )
    call = f"  {signature.function}(" + ",\n      ".join(arguments) + ");\n"
    source = (
        "/* Written by the c_kernel evaluator from the task's `signature:`. */\n"
        '#include "evolve_kernel.h"\n'
        f'#include "{HEADER}"\n\n'
        + "".join(f"static long size_{name};\n" for name in scalars)
        + "\nvoid evolve_setup(int argc, char **argv) {\n"
        + setup
        + "}\n\nvoid evolve_call(const void *inputs, void *output) {\n"
        + ("  (void)inputs;\n" if not inputs else "")
        + call
        + "}\n"
    )
    return Harness(source, header(signature))

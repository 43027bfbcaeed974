# Stands in for one of the two agents a raylet starts, in a lean local instance.
#
# A raylet starts a dashboard agent and a runtime-env agent, and waits until each has
# written the ports it serves into the session directory. In Ray as evolve installs it
# (without the dashboard's dependencies), the dashboard agent serves nothing a run uses
# and writes -1 ("not served") for its ports; the runtime-env agent serves only runtime
# environments, which evolve never asks for (evolve/lean_ray.py says when the real ones
# start instead). Each is still a Python process that imports Ray, 80-88 MB, at every
# start. This script writes "-1" for every port and then only waits, as an agent does, for
# its raylet to end: a raylet whose agent exits ends too.
#
# It is a POSIX shell script, not Python: a Python interpreter that imports nothing still
# held 8 MB, twice in every run; the shell holds about 1 MB.
#
# Run as `sh ray_agent_stand_in.sh FILE...`, where each FILE is a port file the raylet
# waits for (evolve/lean_ray.py names them).

# The raylet names itself in its agents' environment, as Ray's own agents read it. A
# stand-in whose parent is not that raylet was adopted: its raylet is gone already, and
# waiting on the process that adopted it would wait for ever.
raylet=${RAY_RAYLET_PID:-$PPID}
[ "$PPID" = "$raylet" ] || exit 0

# Each file appears whole: the raylet may read it the moment it exists.
for file in "$@"; do
  printf %s -1 > "$file.partial" && mv -f "$file.partial" "$file" || exit 1
done

# A raylet killed with SIGKILL cannot stop its agents: the stand-in sees itself adopted by
# another process, once a second, and ends. The raylet's pid alone would not tell: a dead
# raylet that its parent has not reaped yet still holds it, for as long as that parent
# lives. (/proc/PID/stat's fourth field is the parent's pid; the second, the command's
# name in parentheses, is "(sh)".)
while read -r _ _ _ parent _ < /proc/$$/stat && [ "$parent" = "$raylet" ]; do
  sleep 1
done

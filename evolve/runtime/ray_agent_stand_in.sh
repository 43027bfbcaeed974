# Stands in for one of the two agents a raylet starts, in a lean local instance.
#
# A raylet starts a dashboard agent and a runtime-env agent, and waits until each has
# written the ports it serves into the session directory. In Ray as evolve installs it
# (without the dashboard's dependencies), the dashboard agent serves nothing a run uses
# and writes -1 ("not served") for its ports; the runtime-env agent serves only runtime
# environments, which evolve never asks for (evolve/runtime/lean_ray.py says when the real ones
# start instead). Each would be a Python process that imports Ray, tens of megabytes, at
# every start. This script writes "-1" for every port and then only waits, as an agent does, for
# its raylet to end: a raylet whose agent exits ends too.
#
# It is a POSIX shell script, not Python: a Python interpreter that imports nothing holds
# several times a shell's memory, twice in every run. Once a second it starts a `sleep`.
#
# Run as `sh ray_agent_stand_in.sh FILE...`, where each FILE is a port file the raylet
# waits for (evolve/runtime/lean_ray.py names them).

# The tools it starts are the system's, whatever PATH the raylet passed on.
PATH=/usr/bin:/bin${PATH:+:$PATH}

# The raylet names itself in its agents' environment, as Ray's own agents read it. A
# stand-in whose parent is not that raylet was adopted: its raylet is gone already, and
# waiting on the process that adopted it would wait for ever.
case ${RAY_RAYLET_PID:-} in
  '' | *[!0-9]*) raylet=$PPID ;;
  *) raylet=$RAY_RAYLET_PID ;;
esac
[ "$PPID" -eq "$raylet" ] || exit 0

# This shell's pid and its parent's as the kernel sees them now, in `self` and `parent`:
# the first and fourth fields of /proc/self/stat, the fourth counted after the command's
# name, which is in parentheses and may hold spaces. /proc/self, not /proc/$$: in a PID
# namespace whose /proc is the host's, $$ names another process there.
read_parent() {
  read -r stat < /proc/self/stat || return 1
  self=${stat%% *}
  stat=${stat##*) }
  parent=${stat#* }
  parent=${parent%% *}
  case $parent in '' | *[!0-9]*) return 1 ;; esac
}

# The raylet as /proc names it. In this shell's own PID namespace, that is its pid, so a
# raylet that dies from here on is never mistaken for the process that adopts the
# stand-in. Seen through another namespace's /proc, it is the parent read now.
read_parent || exit 1
if [ "$self" = "$$" ]; then
  raylet_here=$raylet
else
  raylet_here=$parent
fi

# Each file appears whole: the raylet may read it the moment it exists.
for file in "$@"; do
  printf %s -1 > "$file.partial" && mv -f "$file.partial" "$file" || exit 1
done

# A raylet killed with SIGKILL cannot stop its agents: the stand-in sees itself adopted by
# another process, once a second, and ends. The raylet's pid alone would not tell: a dead
# raylet that its parent has not reaped yet still holds it, for as long as that parent
# lives.
while read_parent && [ "$parent" -eq "$raylet_here" ]; do
  sleep 1 || exit 1
done

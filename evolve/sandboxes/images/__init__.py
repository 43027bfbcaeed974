"""The sandbox image: a Dockerfile for hosts with a registry, an offline build for the rest,
and the images that add a task's Debian packages to it (derived.py)."""

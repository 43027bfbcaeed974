"""The sandbox image: a Dockerfile for hosts with a registry, an offline build for the rest."""

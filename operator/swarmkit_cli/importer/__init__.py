"""Reading SwarmKit workspaces, VectorStep skill directories and Swarm bundles, and mapping
them to swarmkit.dev/v1alpha1 manifests (``kubectl swarmkit import``)."""

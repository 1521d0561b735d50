#!/bin/sh
# A swarm node's engine: dockerd on a unix socket in /run/minibroker-node (bind-mounted from the
# host, which reaches the engine there: no TCP, no TLS), its data in /var/lib/docker (a volume).
# NODE_STORAGE_DRIVER picks the storage driver (default overlay2; fuse-overlayfs and vfs work
# where overlay2 does not); NODE_MTU the MTU of its networks (the outer network's, or less).
set -eu
# Not --privileged (these machines' engines run without CAP_SYS_RESOURCE, which --privileged
# asks for and cannot get): every other capability, and /sys and the cgroup controllers made
# writable here, as --privileged would have mounted them.
mount -o remount,rw /sys
for controller in /sys/fs/cgroup/*/; do
  mount -o remount,bind,rw "$controller"
done
# A machine that comes back (the node container started again after a kill) boots with an
# empty /run, as a real one does: the engine's and containerd's state from before is gone.
rm -rf /run/docker /run/containerd /run/docker.pid /run/docker.sock /run/minibroker-node/docker.sock
mkdir -p /run/minibroker-node
exec dockerd \
  --host unix:///run/minibroker-node/docker.sock \
  --host unix:///var/run/docker.sock \
  --storage-driver "${NODE_STORAGE_DRIVER:-overlay2}" \
  --mtu "${NODE_MTU:-1400}" \
  --log-driver json-file --log-opt max-size=10m --log-opt max-file=2

package main

// envAsOwner marks a recoverer that `recover --as-owner` re-executed as the
// root's owner. Its value is "UID:GID:G1,G2,...", the credentials the child
// must hold; it verifies them (and that no capability is left) before it
// does anything.
const envAsOwner = "OWNERJOURNAL_AS_OWNER"

// asOwnerHelp is the --as-owner flag's help.
const asOwnerHelp = "as root, on a root another user owns: re-execute as that user (its UID, GID and groups, no capabilities) for the whole recovery"

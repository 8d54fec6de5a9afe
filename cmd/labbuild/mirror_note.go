package main

import "github.com/labbuild/labbuild/targets"

// mirrorDestroyNote is the line `labbuild destroy` prints about the mirror's storage when
// mirror/registry is among what it destroys (or would: dryRun): kept unless --mirror
// (deleteStorage). Empty when the lab has no mirror.
func mirrorDestroyNote(c *targets.Config, deleteStorage, dryRun bool) string {
	if c == nil || !c.MirrorOn() {
		return ""
	}
	st := targets.ExpandPath(c.Mirror.Storage, "/")
	switch {
	case deleteStorage && dryRun:
		return "would delete the mirror storage " + st + " (--mirror; shared by every lab of this host)"
	case deleteStorage:
		return "deleted the mirror storage " + st + " (--mirror)"
	case dryRun:
		return "would keep the mirror storage " + st + " (labbuild destroy --mirror deletes it)"
	}
	return "kept the mirror storage " + st + " (labbuild destroy --mirror deletes it)"
}

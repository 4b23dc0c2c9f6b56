package engine

import (
	"testing"

	"github.com/idemdb/idem/vfs"
)

// TestParseFileName_SaysWhatEachEntryOfADataDirIs: the checker's
// classification of a data dir's entries follows the names the engine
// writes, and a directory is never a checkpoint file.
func TestParseFileName_SaysWhatEachEntryOfADataDirIs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		isDir bool
		want  FileName
	}{
		{lockFileName, false, FileName{Kind: FileOwn}},
		{backupManifestName, false, FileName{Kind: FileOwn}},
		{restoreEpochName, false, FileName{Kind: FileOwn}},
		{walDirName, true, FileName{Kind: FileOwn}},
		{vlogDirName, true, FileName{Kind: FileOwn}},
		{walDirName, false, FileName{Kind: FileForeign}},
		{"notes.txt", false, FileName{Kind: FileForeign}},
		{partName(7, 3), true, FileName{Kind: FileForeign}},
		{partName(7, 3), false, FileName{Kind: FilePart, Version: 7, Seq: 3}},
		{deltaName(9), false, FileName{Kind: FileDelta, Version: 9}},
		{legacyName(5), false, FileName{Kind: FileLegacy, Version: 5}},
		{deltaName(9) + damagedSuffix, false, FileName{Kind: FileCheckpointDamaged, Version: 9}},
		{partName(7, 0) + damagedSuffix, false, FileName{Kind: FileCheckpointDamaged, Version: 7}},
		{partName(7, 0) + ckptTmpSuffix, false, FileName{Kind: FileCheckpointTemp}},
		{ckptPrefix + "x.ckpt", false, FileName{Kind: FileCheckpointMisnamed}},
	} {
		if got := ParseFileName(tc.name, tc.isDir); got != tc.want {
			t.Errorf("ParseFileName(%q, dir %v) = %+v, want %+v", tc.name, tc.isDir, got, tc.want)
		}
	}
	if _, err := VerifyCheckpointFile(vfs.Default, t.TempDir(), "notes.txt"); err == nil {
		t.Error("VerifyCheckpointFile accepts a name no checkpoint file has")
	}
}

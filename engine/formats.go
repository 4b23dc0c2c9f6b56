package engine

import (
	"strconv"

	"github.com/idemdb/idem/store"
	"github.com/idemdb/idem/wal"
)

// valueLogFormat names the value log's record layout (vlog.go). Its
// records carry no magic: a segment is read only through pointers that
// checkpoints of formats IDEMCKP4 to IDEMCKP7 and IDEMDLT2 to IDEMDLT4 hold
// (vlogptr.go), so their magic is the value log's version too.
const valueLogFormat = "vlog1"

// Formats are the embedded engine's on-disk formats, in the order of a
// data directory's life: log, checkpoints, value log, and the files of a
// backup and of its restore.
func Formats() []store.Format {
	frame := "frame" + strconv.Itoa(wal.FrameVersion)
	return []store.Format{
		{Name: "wal frame", Writes: frame, Reads: []string{frame}},
		{Name: "wal close marker", Writes: wal.MarkerFormat, Reads: []string{wal.MarkerFormat}},
		{Name: "checkpoint part", Writes: partMagic, Reads: []string{partMagic, partMagicV6, partMagicV5, partMagicV4, partMagicV3, legacyMagic}},
		{Name: "checkpoint delta", Writes: deltaMagic, Reads: []string{deltaMagic, deltaMagicV3, deltaMagicV2, deltaMagicV1}},
		{Name: "value log", Writes: valueLogFormat, Reads: []string{valueLogFormat}},
		{Name: "backup manifest", Writes: backupFormatName(backupFormat), Reads: []string{backupFormatName(backupFormat)}},
		{Name: "restore epoch", Writes: restoreFormatName(restoreFormat), Reads: []string{restoreFormatName(restoreFormat)}},
	}
}

// backupFormatName and restoreFormatName name the versions of the backup
// manifest (BACKUP) and the restore epoch (RESTORED), JSON files whose
// "format" member holds the number.
func backupFormatName(n int) string  { return "backup" + strconv.Itoa(n) }
func restoreFormatName(n int) string { return "restored" + strconv.Itoa(n) }

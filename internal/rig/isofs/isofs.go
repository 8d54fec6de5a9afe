// Package isofs writes small ISO 9660 images: the rig's stand-in for the RHCOS live ISO, whose
// files coreos-installer (and labbuild's targets/liveiso) read: coreos/kargs.json and the
// bootloader configs holding the kernel-argument embed areas. No bootloader is written: nothing
// boots the stand-in (the rehearsal's domains boot no OS).
package isofs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
)

const sector = 2048

// Write returns an ISO 9660 image holding files (slash-separated paths, stored upper-cased
// with ";1": give 8.3 names, as the primary volume descriptor's records carry). Each directory
// fits one sector.
func Write(files map[string][]byte) ([]byte, error) {
	type dir struct {
		name     string
		children []string // sorted child names (directories and files)
		lba      int
	}
	dirs := map[string]*dir{"": {}}
	var paths []string
	for p := range files {
		paths = append(paths, strings.ToUpper(strings.Trim(p, "/")))
	}
	sort.Strings(paths)
	data := map[string][]byte{}
	for p, b := range files {
		data[strings.ToUpper(strings.Trim(p, "/"))] = b
	}
	for _, p := range paths {
		parts := strings.Split(p, "/")
		for i := range parts {
			parent, self := strings.Join(parts[:i], "/"), strings.Join(parts[:i+1], "/")
			if i < len(parts)-1 && dirs[self] == nil {
				dirs[self] = &dir{name: parts[i]}
				dirs[parent].children = append(dirs[parent].children, self)
			}
			if i == len(parts)-1 {
				dirs[parent].children = append(dirs[parent].children, self)
			}
		}
	}
	var dnames []string
	for d := range dirs {
		dnames = append(dnames, d)
	}
	sort.Strings(dnames)
	next := 18 // 16: the primary volume descriptor, 17: the terminator
	for _, d := range dnames {
		dirs[d].lba = next
		next++
	}
	fileLBA := map[string]int{}
	for _, p := range paths {
		fileLBA[p] = next
		next += (len(data[p]) + sector - 1) / sector
		if len(data[p]) == 0 {
			next++
		}
	}
	img := make([]byte, next*sector)
	rec := func(id string, lba, size int, isDir bool) []byte {
		n := 33 + len(id)
		if n%2 == 1 {
			n++
		}
		b := make([]byte, n)
		b[0] = byte(n)
		binary.LittleEndian.PutUint32(b[2:], uint32(lba))
		binary.BigEndian.PutUint32(b[6:], uint32(lba))
		binary.LittleEndian.PutUint32(b[10:], uint32(size))
		binary.BigEndian.PutUint32(b[14:], uint32(size))
		if isDir {
			b[25] = 2
		}
		binary.LittleEndian.PutUint16(b[28:], 1)
		binary.BigEndian.PutUint16(b[30:], 1)
		b[32] = byte(len(id))
		copy(b[33:], id)
		return b
	}
	for _, d := range dnames {
		dd := dirs[d]
		parent := ""
		if i := strings.LastIndexByte(d, '/'); i >= 0 {
			parent = d[:i]
		}
		var b bytes.Buffer
		b.Write(rec("\x00", dd.lba, sector, true))
		b.Write(rec("\x01", dirs[parent].lba, sector, true))
		for _, c := range dd.children {
			base := c[strings.LastIndexByte(c, '/')+1:]
			if sub := dirs[c]; sub != nil {
				b.Write(rec(base, sub.lba, sector, true))
			} else {
				b.Write(rec(base+";1", fileLBA[c], len(data[c]), false))
			}
		}
		if b.Len() > sector {
			return nil, fmt.Errorf("isofs: directory %q needs more than one sector", d)
		}
		copy(img[dd.lba*sector:], b.Bytes())
	}
	for _, p := range paths {
		copy(img[fileLBA[p]*sector:], data[p])
	}
	pvd := img[16*sector:]
	pvd[0], pvd[6] = 1, 1
	copy(pvd[1:], "CD001")
	copy(pvd[8:40], fmt.Sprintf("%-32s", "LINUX"))
	copy(pvd[40:72], fmt.Sprintf("%-32s", "LABBUILD-LIVE"))
	binary.LittleEndian.PutUint32(pvd[80:], uint32(next))
	binary.BigEndian.PutUint32(pvd[84:], uint32(next))
	binary.LittleEndian.PutUint16(pvd[120:], 1)
	binary.BigEndian.PutUint16(pvd[122:], 1)
	binary.LittleEndian.PutUint16(pvd[124:], 1)
	binary.BigEndian.PutUint16(pvd[126:], 1)
	binary.LittleEndian.PutUint16(pvd[128:], sector)
	binary.BigEndian.PutUint16(pvd[130:], sector)
	copy(pvd[156:190], rec("\x00", dirs[""].lba, sector, true))
	pvd[881] = 1
	term := img[17*sector:]
	term[0], term[6] = 255, 1
	copy(term[1:], "CD001")
	return img, nil
}

// LiveISO returns a stand-in live ISO whose karg embed areas (coreos/kargs.json, one area in
// isolinux/isolinux.cfg and one in EFI/REDHAT/GRUB.CFG, size bytes each) hold kargs, laid out
// as the RHCOS ISO lays them out (an `append`/`linux` line ending in the area).
func LiveISO(kargs string, size int) ([]byte, error) {
	area := func() string {
		s := kargs + "\n"
		return s + strings.Repeat("#", size-len(s))
	}
	if len(kargs)+1 > size {
		return nil, fmt.Errorf("isofs: kargs longer than the %d-byte area", size)
	}
	isolinux := "label linux\n  kernel /images/pxeboot/vmlinuz\n  append initrd=/images/pxeboot/initrd.img,/images/ignition.img "
	grub := "menuentry 'RHCOS (Live)' {\n  linux /images/pxeboot/vmlinuz "
	info := fmt.Sprintf(`{"default":%q,"files":[{"path":"EFI/redhat/grub.cfg","offset":%d},{"path":"isolinux/isolinux.cfg","offset":%d}],"size":%d}`,
		kargs, len(grub), len(isolinux), size)
	return Write(map[string][]byte{
		"COREOS/KARGS.JSO":      []byte(info),
		"ISOLINUX/ISOLINUX.CFG": []byte(isolinux + area() + "\n"),
		"EFI/REDHAT/GRUB.CFG":   []byte(grub + area() + "\n  initrd /images/pxeboot/initrd.img /images/ignition.img\n}\n"),
		"IMAGES/IGNITION.IMG":   make([]byte, 4096),
	})
}

package personfiles

import (
	"container/list"
	"fmt"
	"os"
	"sync"

	"github.com/clankie/clankie/memory/durable"
)

// maxOpenLogs bounds the person logs kept open between changes: enough
// for every busy person (the decoded-person cache holds a few hundred),
// far below any process's descriptor limit.
const maxOpenLogs = 256

// logFiles keeps recently used person logs open, so a change appends with
// one pwrite and a compaction rewrites its log in place: no open, close or
// new inode on the request path. A descriptor is used only under its
// person's lock; one in use is never closed to make room (refs), so the
// bound can be passed briefly when more people than it change at once.
// A log replaced by a rename or removed must be dropped first, or a later
// write would land in the unlinked file.
type logFiles struct {
	mu    sync.Mutex
	order *list.List // least recently released at the back; values are *openLog
	items map[string]*list.Element
}

type openLog struct {
	name    string
	f       *os.File
	refs    int
	dropped bool // no longer in items: close once refs reach 0
}

func newLogFiles() *logFiles {
	return &logFiles{order: list.New(), items: map[string]*list.Element{}}
}

// acquire returns name's log open for reading and writing, and the release
// to call when done with it. With create the log is created (empty) when
// missing; without, a missing log is an error durable.IsNotExist reports.
func (l *logFiles) acquire(dir *os.Root, name string, create bool) (*os.File, func(), error) {
	l.mu.Lock()
	if el, ok := l.items[name]; ok {
		ol := el.Value.(*openLog)
		ol.refs++
		l.order.MoveToFront(el)
		l.mu.Unlock()
		return ol.f, func() { l.release(ol) }, nil
	}
	l.mu.Unlock()
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := dir.OpenFile(name, flags, durable.FileMode)
	if err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if el, ok := l.items[name]; ok { // opened meanwhile: keep one descriptor
		f.Close()
		ol := el.Value.(*openLog)
		ol.refs++
		l.order.MoveToFront(el)
		return ol.f, func() { l.release(ol) }, nil
	}
	ol := &openLog{name: name, f: f, refs: 1}
	l.items[name] = l.order.PushFront(ol)
	l.trimLocked()
	return f, func() { l.release(ol) }, nil
}

func (l *logFiles) release(ol *openLog) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ol.refs--
	if ol.refs == 0 && ol.dropped {
		ol.f.Close()
	}
	l.trimLocked()
}

// trimLocked closes the least recently used logs no one holds until at
// most maxOpenLogs are open.
func (l *logFiles) trimLocked() {
	for el := l.order.Back(); el != nil && l.order.Len() > maxOpenLogs; {
		prev := el.Prev()
		if ol := el.Value.(*openLog); ol.refs == 0 {
			l.order.Remove(el)
			delete(l.items, ol.name)
			ol.f.Close()
		}
		el = prev
	}
}

// drop forgets name's descriptor (closing it once no one holds it): the
// caller is about to replace or remove the log, or has.
func (l *logFiles) drop(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.items[name]
	if !ok {
		return
	}
	l.order.Remove(el)
	delete(l.items, name)
	ol := el.Value.(*openLog)
	ol.dropped = true
	if ol.refs == 0 {
		ol.f.Close()
	}
}

// closeAll closes every log; the store is closing and nothing holds one.
func (l *logFiles) closeAll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first error
	for el := l.order.Front(); el != nil; el = el.Next() {
		if err := el.Value.(*openLog).f.Close(); err != nil && first == nil {
			first = fmt.Errorf("close a person log: %w", err)
		}
	}
	l.order.Init()
	clear(l.items)
	return first
}

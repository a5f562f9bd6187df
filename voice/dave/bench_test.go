package dave

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"testing"
	"time"

	"github.com/clankie/clankie/voice/dave/davetest"
)

// A 20 ms Opus frame at voice bitrates is ~120 bytes.
var benchFrame = bytes.Repeat([]byte{0x78, 0x9a, 0x21, 0x05}, 30)

func benchAEAD(b *testing.B) cipher.AEAD {
	block, err := aes.NewCipher(bytes.Repeat([]byte{1}, 16))
	if err != nil {
		b.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		b.Fatal(err)
	}
	return aead
}

// BenchmarkBaselineAESGCMSeal is the bare AES-128-GCM seal of the same bytes.
func BenchmarkBaselineAESGCMSeal(b *testing.B) {
	aead := benchAEAD(b)
	nonce := make([]byte, 12)
	dst := make([]byte, 0, 256)
	b.SetBytes(int64(len(benchFrame)))
	for i := 0; b.Loop(); i++ {
		nonce[8] = byte(i)
		dst = aead.Seal(dst[:0], nonce, benchFrame, nil)
	}
}

// BenchmarkBaselineAESGCMOpen is the bare AES-128-GCM open of the same bytes.
func BenchmarkBaselineAESGCMOpen(b *testing.B) {
	aead := benchAEAD(b)
	nonce := make([]byte, 12)
	sealed := aead.Seal(nil, nonce, benchFrame, nil)
	dst := make([]byte, 0, 256)
	b.SetBytes(int64(len(benchFrame)))
	for b.Loop() {
		var err error
		dst, err = aead.Open(dst[:0], nonce, sealed, nil)
		if err != nil {
			b.Fatal(err)
		}
	}
}

func benchSession(b *testing.B) *Session {
	s, err := New(Options{UserID: 1, ChannelID: 2})
	if err != nil {
		b.Fatal(err)
	}
	s.version = 1
	s.enc.passthrough = false
	s.enc.setRatchet(newKeyRatchet(bytes.Repeat([]byte{5}, 16)))
	return s
}

// BenchmarkEncryptOpus is Session.Encrypt of a 20 ms Opus frame.
func BenchmarkEncryptOpus(b *testing.B) {
	s := benchSession(b)
	dst := make([]byte, 0, 256)
	b.SetBytes(int64(len(benchFrame)))
	for b.Loop() {
		var err error
		dst, err = s.Encrypt(dst[:0], benchFrame)
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecryptOpus is Session.Decrypt of a 20 ms Opus frame: parse,
// replay check, AES-128-GCM with the truncated tag.
func BenchmarkDecryptOpus(b *testing.B) {
	s := benchSession(b)
	const batch = 1 << 14
	frames := make([][]byte, batch)
	for i := range frames {
		f, err := s.Encrypt(nil, benchFrame)
		if err != nil {
			b.Fatal(err)
		}
		frames[i] = f
	}
	now := s.now()
	fresh := func() {
		d := s.decryptor(2)
		d.managers = []*cryptorManager{newCryptorManager(newKeyRatchet(bytes.Repeat([]byte{5}, 16)), now)}
		d.passthroughOn = false
	}
	fresh()
	dst := make([]byte, 0, 256)
	b.SetBytes(int64(len(benchFrame)))
	i := 0
	for b.Loop() {
		if i == batch {
			b.StopTimer()
			fresh()
			i = 0
			b.StartTimer()
		}
		var err error
		dst, err = s.Decrypt(2, dst[:0], frames[i])
		if err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkProcessCommitAdd25 is one member of a 25-member group processing
// another member's commit that adds a 26th: MLS commit processing, the roster
// check and the 26 sender ratchets of the new epoch.
func BenchmarkProcessCommitAdd25(b *testing.B) {
	es, err := davetest.NewExternalSender()
	if err != nil {
		b.Fatal(err)
	}
	const ch = 99
	pkg := es.Package()
	start := func(id UserID, others ...UserID) (*Session, []byte) {
		s, err := New(Options{UserID: id, ChannelID: ch, Now: func() time.Time { return time.Unix(1e9, 0) }})
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range others {
			s.AddUser(o)
		}
		out, err := s.OnSelectProtocolAck(1)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.OnExternalSender(pkg); err != nil {
			b.Fatal(err)
		}
		return s, out[0].Payload
	}
	var ids []UserID
	for i := 1; i <= 26; i++ {
		ids = append(ids, UserID(1000+i))
	}
	founder, _ := start(ids[0], ids...)
	members := []*Session{founder}
	var adds [][]byte
	for _, id := range ids[1:25] {
		s, kp := start(id)
		members = append(members, s)
		msg, _, err := es.ProposeAdd(groupID(ch), 0, kp)
		if err != nil {
			b.Fatal(err)
		}
		adds = append(adds, msg)
	}
	out, err := founder.OnProposals(davetest.ProposalsAppend(adds...))
	if err != nil || len(out) != 1 {
		b.Fatalf("founding commit: %v", err)
	}
	commit, welcome, err := SplitCommitWelcome(out[0].Payload)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := founder.OnAnnounceCommit(1, commit); err != nil {
		b.Fatal(err)
	}
	committer, processor := members[1], members[2]
	for _, s := range []*Session{committer, processor} {
		if _, err := s.OnWelcome(1, welcome); err != nil {
			b.Fatal(err)
		}
		s.AddUser(ids[25])
	}
	_, kp26 := start(ids[25])
	add, _, err := es.ProposeAdd(groupID(ch), 1, kp26)
	if err != nil {
		b.Fatal(err)
	}
	out, err = committer.OnProposals(davetest.ProposalsAppend(add))
	if err != nil || len(out) != 1 {
		b.Fatalf("commit adding the 26th: %v", err)
	}
	commit26, _, err := SplitCommitWelcome(out[0].Payload)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := processor.OnProposals(davetest.ProposalsAppend(add)); err != nil {
		b.Fatal(err)
	}
	saved := processor.m.established
	if n := len(roster(saved)); n != 25 {
		b.Fatalf("group of %d", n)
	}
	b.ResetTimer()
	for b.Loop() {
		processor.m.established, processor.m.outbound, processor.m.ownCommit = saved, nil, nil
		processor.decs = make(map[UserID]*decryptor)
		res, err := processor.OnAnnounceCommit(2, commit26)
		if err != nil || len(res) != 1 || res[0].Op != OpReadyForTransition {
			b.Fatalf("processing the commit: %v", err)
		}
	}
	if n := len(processor.Members()); n != 26 {
		b.Fatalf("group of %d after the commit", n)
	}
}

// BenchmarkRatioVsAESGCM measures Encrypt and Decrypt of a 20 ms Opus frame
// against a bare AES-128-GCM seal and open of the same bytes, alternating
// batches of 256 so that load from other processes hits both alike, and
// reports the ratios (goal: at most 2).
func BenchmarkRatioVsAESGCM(b *testing.B) {
	const batch = 256
	aead := benchAEAD(b)
	nonce := make([]byte, 12)
	sealed := aead.Seal(nil, nonce, benchFrame, nil)
	s := benchSession(b)
	frames := make([][]byte, 1<<14)
	for i := range frames {
		frames[i], _ = s.Encrypt(nil, benchFrame)
	}
	now := s.now()
	fresh := func() {
		d := s.decryptor(2)
		d.managers = []*cryptorManager{newCryptorManager(newKeyRatchet(bytes.Repeat([]byte{5}, 16)), now)}
		d.passthroughOn = false
	}
	fresh()
	dst := make([]byte, 0, 256)
	var tSeal, tEnc, tOpen, tDec time.Duration
	next := 0
	for b.Loop() {
		t0 := time.Now()
		for i := 0; i < batch; i++ {
			nonce[8] = byte(i)
			dst = aead.Seal(dst[:0], nonce, benchFrame, nil)
		}
		t1 := time.Now()
		for i := 0; i < batch; i++ {
			dst, _ = s.Encrypt(dst[:0], benchFrame)
		}
		t2 := time.Now()
		nonce[8] = 0
		for i := 0; i < batch; i++ {
			dst, _ = aead.Open(dst[:0], nonce, sealed, nil)
		}
		t3 := time.Now()
		if next+batch > len(frames) {
			fresh()
			next = 0
		}
		for i := 0; i < batch; i++ {
			var err error
			if dst, err = s.Decrypt(2, dst[:0], frames[next]); err != nil {
				b.Fatal(err)
			}
			next++
		}
		t4 := time.Now()
		tSeal += t1.Sub(t0)
		tEnc += t2.Sub(t1)
		tOpen += t3.Sub(t2)
		tDec += t4.Sub(t3)
	}
	n := float64(b.N * batch)
	b.ReportMetric(float64(tSeal.Nanoseconds())/n, "seal-ns/frame")
	b.ReportMetric(float64(tEnc.Nanoseconds())/n, "encrypt-ns/frame")
	b.ReportMetric(float64(tOpen.Nanoseconds())/n, "open-ns/frame")
	b.ReportMetric(float64(tDec.Nanoseconds())/n, "decrypt-ns/frame")
	b.ReportMetric(float64(tEnc)/float64(tSeal), "encrypt/seal")
	b.ReportMetric(float64(tDec)/float64(tOpen), "decrypt/open")
	b.ReportMetric(0, "ns/op")
}

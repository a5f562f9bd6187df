package dave

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/thomas-vilte/mls-go/ciphersuite"
	"github.com/thomas-vilte/mls-go/credentials"
	"github.com/thomas-vilte/mls-go/extensions"
	"github.com/thomas-vilte/mls-go/framing"
	"github.com/thomas-vilte/mls-go/group"
	"github.com/thomas-vilte/mls-go/keypackages"
)

// suite is MLS ciphersuite 2, DHKEMP256_AES128GCM_SHA256_P256, the only one
// DAVE protocol version 1 uses.
const suite = ciphersuite.MLS128DHKEMP256

// Errors of the group layer. The session turns the ones that make a commit
// or welcome unusable into op 31 and a fresh key package.
var (
	ErrNoGroup          = errors.New("dave: no MLS group yet")
	ErrNoExternalSender = errors.New("dave: no external sender package received yet")
	ErrBadProposal      = errors.New("dave: proposal refused")
	ErrBadCommit        = errors.New("dave: commit refused")
	ErrBadWelcome       = errors.New("dave: welcome refused")
	ErrBadMessage       = errors.New("dave: malformed message")
)

// member is our MLS state as a DAVE group member: our signing identity, our
// current key package, the local group we would found (pending), the
// established group, and the outbound state our last commit would produce.
type member struct {
	userID  uint64
	groupID []byte

	cred   *credentials.CredentialWithKey
	sigKey *ciphersuite.SignaturePrivateKey

	kp     *keypackages.KeyPackage
	kpPriv *keypackages.KeyPackagePrivateKeys

	extSender []byte // raw ExternalSender struct from op 25

	pending     *group.Group // local group (epoch 0) before one is established
	established *group.Group

	ownCommit []byte       // the commit we sent for the current epoch
	outbound  *group.Group // our group after ownCommit, should it win
}

func newMember(userID uint64) (*member, error) {
	identity := binary.BigEndian.AppendUint64(nil, userID)
	cred, sigKey, err := credentials.GenerateCredentialWithKeyForCS(identity, suite)
	if err != nil {
		return nil, fmt.Errorf("dave: signing key: %w", err)
	}
	return &member{userID: userID, cred: cred, sigKey: sigKey}, nil
}

// reset forgets every group and pending state; the signing key is kept.
func (m *member) reset() {
	m.pending, m.established, m.outbound, m.ownCommit = nil, nil, nil, nil
	m.kp, m.kpPriv = nil, nil
}

// current is the group proposals and commits apply to.
func (m *member) current() *group.Group {
	if m.established != nil {
		return m.established
	}
	return m.pending
}

// keyPackage creates a fresh key package (replacing any previous one) and
// returns it serialised as a bare KeyPackage, as Discord clients send it.
func (m *member) keyPackage() ([]byte, error) {
	kp, priv, err := keypackages.Generate(m.cred, suite, keypackages.InfiniteLifetime())
	if err != nil {
		return nil, fmt.Errorf("dave: key package: %w", err)
	}
	m.kp, m.kpPriv = kp, priv
	return kp.Marshal(), nil
}

// setExternalSender records the voice gateway's external sender. Once a
// group is established it is ignored, as protocol.md says.
func (m *member) setExternalSender(payload []byte) error {
	if m.established != nil {
		return nil
	}
	if _, err := extensions.ParseSingleExternalSender(payload); err != nil {
		return fmt.Errorf("%w: external sender package: %w", ErrBadMessage, err)
	}
	if !bytes.Equal(m.extSender, payload) {
		// A local group founded with another external sender is useless.
		m.pending, m.outbound, m.ownCommit = nil, nil, nil
	}
	m.extSender = append([]byte(nil), payload...)
	return nil
}

// createPending founds our local group (only us, epoch 0) once we know the
// external sender and have a key package and a group id.
func (m *member) createPending() error {
	if m.established != nil || m.pending != nil {
		return nil
	}
	if m.extSender == nil {
		return ErrNoExternalSender
	}
	if m.kp == nil {
		if _, err := m.keyPackage(); err != nil {
			return err
		}
	}
	ext := group.Extension{Type: extensions.ExtensionTypeExternalSenders, Data: appendVarint(nil, len(m.extSender))}
	ext.Data = append(ext.Data, m.extSender...)
	g, err := group.NewGroup(group.NewGroupID(m.groupID), suite, m.kp, m.kpPriv, group.WithExtensions([]group.Extension{ext}))
	if err != nil {
		return fmt.Errorf("dave: creating local group: %w", err)
	}
	m.pending = g
	return nil
}

// proposals applies an op 27 payload and returns our commit and welcome
// (op 28 payload: MLSMessage commit, then the Welcome when members are added),
// or nil when no proposals remain. recognized reports whether a user id may
// be added.
func (m *member) proposals(payload []byte, recognized func(uint64) bool) ([]byte, error) {
	g := m.current()
	if g == nil {
		return nil, nil // protocol.md: proposals without a local group are ignored
	}
	op, items, err := parseProposals(payload)
	if err != nil {
		return nil, err
	}
	// Apply the batch to a copy (dropping any commit of ours not yet
	// announced), so that a bad proposal leaves the group as it was.
	base, err := cloneGroup(g, m.outbound != nil)
	if err != nil {
		return nil, err
	}
	switch op {
	case proposalsRevoke:
		for _, ref := range items {
			if !base.RevokeProposal(ref) {
				return nil, fmt.Errorf("%w: revoke of an unknown proposal", ErrBadProposal)
			}
		}
	case proposalsAppend:
		for _, raw := range items {
			if err := acceptProposal(base, raw, recognized); err != nil {
				return nil, err
			}
		}
	}
	m.setCurrent(base)
	m.outbound, m.ownCommit = nil, nil
	if len(base.StoredProposals()) == 0 {
		return nil, nil
	}
	return m.commit(base)
}

func (m *member) setCurrent(g *group.Group) {
	if m.established != nil {
		m.established = g
	} else {
		m.pending = g
	}
}

// cloneGroup copies a group through its serialised state. When the group
// holds a commit of ours not yet announced, that commit is discarded first.
func cloneGroup(g *group.Group, discard bool) (*group.Group, error) {
	if g.PendingCommit() != nil || discard {
		_ = g.DiscardPendingCommit()
	}
	st, err := g.MarshalState()
	if err != nil {
		return nil, fmt.Errorf("dave: saving group state: %w", err)
	}
	c, err := group.UnmarshalGroupState(st)
	clear(st)
	if err != nil {
		return nil, fmt.Errorf("dave: restoring group state: %w", err)
	}
	return c, nil
}

func acceptProposal(g *group.Group, raw []byte, recognized func(uint64) bool) error {
	msg, err := framing.UnmarshalMLSMessage(raw)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadProposal, err)
	}
	pm, ok := msg.AsPublic()
	if !ok {
		return fmt.Errorf("%w: not a public message", ErrBadProposal)
	}
	if pm.Content.Sender.Type != framing.SenderTypeExternal || pm.Content.Sender.SenderIndex != 0 {
		return fmt.Errorf("%w: not from the voice gateway's external sender", ErrBadProposal)
	}
	if pm.Content.ContentType() != framing.ContentTypeProposal {
		return fmt.Errorf("%w: not a proposal", ErrBadProposal)
	}
	if pm.Content.Epoch != g.Epoch().AsUint64() {
		return fmt.Errorf("%w: proposal for epoch %d, group is at %d", ErrBadProposal, pm.Content.Epoch, g.Epoch().AsUint64())
	}
	body, _ := pm.Content.Body.(framing.ProposalBody)
	p, err := group.UnmarshalProposal(body.Data)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadProposal, err)
	}
	switch p.Type {
	case group.ProposalTypeAdd:
		if p.Add == nil || p.Add.KeyPackage == nil || p.Add.KeyPackage.LeafNode == nil {
			return fmt.Errorf("%w: empty add", ErrBadProposal)
		}
		uid, ok := userIDOf(p.Add.KeyPackage.LeafNode.Credential)
		if !ok {
			return fmt.Errorf("%w: add proposal credential is not a DAVE user id", ErrBadProposal)
		}
		if recognized != nil && !recognized(uid) {
			return fmt.Errorf("%w: add proposal for a user not in the call", ErrBadProposal)
		}
	case group.ProposalTypeRemove:
	default:
		return fmt.Errorf("%w: proposal type %d is not add or remove", ErrBadProposal, p.Type)
	}
	if err := g.ProcessPublicMessage(pm); err != nil {
		return fmt.Errorf("%w: %w", ErrBadProposal, err)
	}
	return nil
}

// commit commits every stored proposal by reference. g keeps the pre-commit
// state; the post-commit group is kept as m.outbound.
func (m *member) commit(g *group.Group) ([]byte, error) {
	out, err := cloneGroup(g, false)
	if err != nil {
		return nil, err
	}
	staged, err := out.Commit(m.sigKey, m.sigKey.PublicKey(), nil)
	if err != nil {
		return nil, fmt.Errorf("dave: creating commit: %w", err)
	}
	var joiners []*keypackages.KeyPackage
	for _, p := range staged.Proposals() {
		if p.Type == group.ProposalTypeAdd && p.Add != nil {
			joiners = append(joiners, p.Add.KeyPackage)
		}
	}
	ac := staged.AuthenticatedContent()
	commitMsg := framing.NewMLSMessagePublic(&framing.PublicMessage{Content: ac.Content, Auth: ac.Auth, MembershipTag: staged.MembershipTag()}).Marshal()
	joinerSecret := staged.JoinerSecret().Clone()
	if err := out.MergeCommit(staged); err != nil {
		return nil, fmt.Errorf("dave: applying own commit: %w", err)
	}
	result := append([]byte(nil), commitMsg...)
	if len(joiners) > 0 {
		w, err := welcomeFor(out, staged, joinerSecret, joiners, m.sigKey)
		if err != nil {
			return nil, err
		}
		result = append(result, w...)
	}
	m.ownCommit, m.outbound = commitMsg, out
	return result, nil
}

// welcomeFor builds the Welcome for joiners after our commit, out being
// the group after it. mls-go v1.3.1 copies the group context extensions
// (here external_senders) into the GroupInfo's own extensions, which OpenMLS
// (and so davey) refuses as malformed; RFC 9420 puts them in the
// GroupContext only. So the GroupInfo is rebuilt without them, signed and
// encrypted again under the same welcome key, and each joiner's GroupSecrets
// (which mls-go computes, per-joiner path secret included) are encrypted
// again to the joiner's init key, since their HPKE context is the encrypted
// GroupInfo (RFC 9420 §12.4.3.1). To read those GroupSecrets, mls-go is
// given copies of the key packages whose init key is an ephemeral one of ours.
func welcomeFor(out *group.Group, staged *group.StagedCommit, joinerSecret *ciphersuite.Secret, joiners []*keypackages.KeyPackage, sigKey *ciphersuite.SignaturePrivateKey) ([]byte, error) {
	eph, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("dave: ephemeral welcome key: %w", err)
	}
	stand := make([]*keypackages.KeyPackage, len(joiners))
	for i, kp := range joiners {
		c := *kp
		c.InitKey = eph.PublicKey().Bytes()
		stand[i] = &c
	}
	w, err := out.CreateWelcomeWithOpts(stand, sigKey,
		group.WithJoinerSecret(joinerSecret),
		group.WithPSKIDs(staged.PskIDs()),
		group.WithPSKSecret(staged.RawPskSecret()),
		group.WithStagedCommit(staged),
		group.WithGroupInfoOptions(group.WithRatchetTree(true), group.WithExternalPub(false)),
	)
	if err != nil {
		return nil, fmt.Errorf("dave: creating welcome: %w", err)
	}
	if len(w.Secrets) != len(joiners) || w.GroupInfo == nil {
		return nil, errors.New("dave: creating welcome: unexpected shape")
	}
	secrets := make([][]byte, len(joiners))
	defer func() {
		for _, s := range secrets {
			clear(s)
		}
	}()
	for i := range joiners {
		secrets[i], err = ciphersuite.DecryptWithLabel(eph.Bytes(), "Welcome", w.EncryptedGroupInfo, &w.Secrets[i].EncryptedGroupSecrets, suite)
		if err != nil {
			return nil, fmt.Errorf("dave: reading welcome secrets: %w", err)
		}
	}
	gi := w.GroupInfo
	kept := gi.Extensions[:0]
	for _, e := range gi.Extensions {
		if e.Type == extensions.ExtensionTypeRatchetTree || e.Type == extensions.ExtensionTypeExternalPub {
			kept = append(kept, e)
		}
	}
	gi.Extensions = kept
	sig, err := ciphersuite.SignWithLabel(sigKey, "GroupInfoTBS", gi.MarshalTBS())
	if err != nil {
		return nil, fmt.Errorf("dave: signing group info: %w", err)
	}
	gi.Signature = sig.AsSlice()
	psk := staged.RawPskSecret()
	if psk == nil {
		psk = ciphersuite.ZeroSecretCS(suite)
	}
	member, err := ciphersuite.NewSecretForCS(suite, joinerSecret.AsSlice()).HKDFExtract(psk)
	if err != nil {
		return nil, fmt.Errorf("dave: welcome secret: %w", err)
	}
	welcome, err := member.DeriveSecret(suite, "welcome")
	if err != nil {
		return nil, fmt.Errorf("dave: welcome secret: %w", err)
	}
	key, err := welcome.KdfExpandLabel("key", nil, suite.AEADKeyLength())
	if err != nil {
		return nil, fmt.Errorf("dave: welcome key: %w", err)
	}
	nonce, err := welcome.KdfExpandLabel("nonce", nil, suite.AEADNonceLength())
	if err != nil {
		return nil, fmt.Errorf("dave: welcome nonce: %w", err)
	}
	w.EncryptedGroupInfo, err = ciphersuite.EncryptWithCipherSuite(key.AsSlice(), nonce.AsSlice(), gi.Marshal(), nil, suite)
	if err != nil {
		return nil, fmt.Errorf("dave: encrypting group info: %w", err)
	}
	for i, kp := range joiners {
		ct, err := ciphersuite.EncryptWithLabel(kp.InitKey, "Welcome", w.EncryptedGroupInfo, secrets[i], suite)
		if err != nil {
			return nil, fmt.Errorf("dave: encrypting welcome secrets: %w", err)
		}
		w.Secrets[i] = group.EncryptedGroupSecrets{NewMember: keyPackageRef(kp), EncryptedGroupSecrets: *ct}
	}
	return w.Marshal(), nil
}

// keyPackageRef is MakeKeyPackageRef (RFC 9420 §5.2).
func keyPackageRef(kp *keypackages.KeyPackage) []byte {
	label := "MLS 1.0 KeyPackage Reference"
	v := kp.Marshal()
	in := appendVarint(nil, len(label))
	in = append(in, label...)
	in = appendVarint(in, len(v))
	in = append(in, v...)
	h := sha256.Sum256(in)
	return h[:]
}

// processCommit handles an announced commit (op 29). It reports whether the
// group changed; an ignorable commit (not for our group, or one we are not
// part of yet) returns false and no error.
func (m *member) processCommit(raw []byte) (bool, error) {
	if m.ownCommit != nil && bytes.Equal(raw, m.ownCommit) {
		g := m.outbound
		if err := checkRoster(g); err != nil {
			return false, err
		}
		m.established, m.pending, m.outbound, m.ownCommit = g, nil, nil, nil
		return true, nil
	}
	g := m.established
	if g == nil {
		// Not our commit and we have no established group: the welcome
		// brings us in; nothing here to apply.
		return false, nil
	}
	msg, err := framing.UnmarshalMLSMessage(raw)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrBadCommit, err)
	}
	pm, ok := msg.AsPublic()
	if !ok {
		return false, fmt.Errorf("%w: not a public message", ErrBadCommit)
	}
	if pm.Content.ContentType() != framing.ContentTypeCommit || pm.Content.Sender.Type != framing.SenderTypeMember {
		return false, fmt.Errorf("%w: not a member's commit", ErrBadCommit)
	}
	if !bytes.Equal(pm.Content.GroupID, g.ID().AsSlice()) {
		return false, fmt.Errorf("%w: commit for another group", ErrBadCommit)
	}
	if e := pm.Content.Epoch; e != g.Epoch().AsUint64() {
		if e < g.Epoch().AsUint64() {
			return false, nil // an old commit (e.g. the one whose welcome brought us in)
		}
		return false, fmt.Errorf("%w: commit for epoch %d, group is at %d", ErrBadCommit, e, g.Epoch().AsUint64())
	}
	body, _ := pm.Content.Body.(framing.CommitBody)
	c, err := group.UnmarshalCommit(body.Data)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrBadCommit, err)
	}
	for _, p := range c.Proposals {
		if p.Proposal != nil || len(p.ProposalRef) == 0 {
			return false, fmt.Errorf("%w: commit carries a proposal by value", ErrBadCommit)
		}
	}
	next, err := cloneGroup(g, m.outbound != nil)
	if err != nil {
		return false, err
	}
	if err := next.ProcessPublicMessage(pm); err != nil {
		return false, fmt.Errorf("%w: %w", ErrBadCommit, err)
	}
	if err := checkRoster(next); err != nil {
		return false, err
	}
	m.established, m.outbound, m.ownCommit = next, nil, nil
	return true, nil
}

// processWelcome joins the group a welcome (op 30) describes.
func (m *member) processWelcome(raw []byte) error {
	if m.established != nil {
		return nil
	}
	if m.kp == nil {
		return fmt.Errorf("%w: no key package of ours to join with", ErrBadWelcome)
	}
	if m.extSender == nil {
		return fmt.Errorf("%w: %w", ErrBadWelcome, ErrNoExternalSender)
	}
	// protocol.md 1.1.2 made op 30 a bare Welcome; accept one wrapped in an
	// MLSMessage (version mls10, wire format mls_welcome) too.
	if len(raw) >= 4 && binary.BigEndian.Uint16(raw) == 1 && binary.BigEndian.Uint16(raw[2:]) == 3 {
		raw = raw[4:]
	}
	w, err := group.UnmarshalWelcome(raw)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadWelcome, err)
	}
	if w.CipherSuite != suite {
		return fmt.Errorf("%w: ciphersuite %d", ErrBadWelcome, w.CipherSuite)
	}
	g, err := group.JoinFromWelcome(w, m.kp, m.kpPriv, nil)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadWelcome, err)
	}
	ext := appendVarint(nil, len(m.extSender))
	ext = append(ext, m.extSender...)
	found := 0
	for _, e := range g.GroupContext().Extensions {
		if e.Type == extensions.ExtensionTypeExternalSenders {
			found++
			if !bytes.Equal(e.Data, ext) {
				return fmt.Errorf("%w: group's external sender is not the voice gateway's", ErrBadWelcome)
			}
		}
	}
	if found != 1 {
		return fmt.Errorf("%w: group has no external sender", ErrBadWelcome)
	}
	if err := checkRoster(g); err != nil {
		return fmt.Errorf("%w: %w", ErrBadWelcome, err)
	}
	m.established, m.pending, m.outbound, m.ownCommit = g, nil, nil, nil
	return nil
}

// checkRoster refuses a group where two leaves carry the same user id.
func checkRoster(g *group.Group) error {
	seen := make(map[uint64]bool)
	var err error
	g.IterateMembers(func(_ group.LeafNodeIndex, mem *group.Member) {
		uid, ok := userIDOf(mem.Credential)
		if !ok {
			err = fmt.Errorf("%w: a member's credential is not a DAVE user id", ErrBadCommit)
			return
		}
		if seen[uid] {
			err = fmt.Errorf("%w: duplicate user id in the group", ErrBadCommit)
		}
		seen[uid] = true
	})
	return err
}

// roster returns the user ids of the established group's members.
func roster(g *group.Group) []uint64 {
	var ids []uint64
	g.IterateMembers(func(_ group.LeafNodeIndex, mem *group.Member) {
		if uid, ok := userIDOf(mem.Credential); ok {
			ids = append(ids, uid)
		}
	})
	return ids
}

func userIDOf(c *credentials.Credential) (uint64, bool) {
	if c == nil || c.CredentialType != credentials.BasicCredential || len(c.Identity) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(c.Identity), true
}

// senderSecret exports the base secret of uid's key ratchet for g's epoch.
func senderSecret(g *group.Group, uid uint64) ([]byte, error) {
	es := g.EpochSecrets()
	if es == nil || es.ExporterSecret == nil {
		return nil, fmt.Errorf("dave: exporting a sender secret: %w", ErrNoGroup)
	}
	return mlsExporter(es.ExporterSecret.AsSlice(), senderKeyLabel, binary.LittleEndian.AppendUint64(nil, uid), baseSecretSize)
}

// mlsExporter is MLS-Exporter (RFC 9420 §8.5):
//
//	ExpandWithLabel(DeriveSecret(exporter_secret, Label), "exported", Hash(Context), Length)
//
// computed here because mls-go v1.3.1's Group.Export uses the label
// "exporter" instead of "exported" and so disagrees with every other
// implementation.
func mlsExporter(exporterSecret []byte, label string, context []byte, length int) ([]byte, error) {
	derived, err := expandWithLabel(exporterSecret, label, nil, secretSize)
	if err != nil {
		return nil, err
	}
	defer clear(derived)
	h := sha256.Sum256(context)
	return expandWithLabel(derived, "exported", h[:], length)
}

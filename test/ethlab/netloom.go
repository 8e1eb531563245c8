package ethlab

import (
	"fmt"
	"strings"
)

// NetloomConfig is the configuration of Netloom's Ethernet source
// (`netloom serve --fabric eth:FILE`, docs/ethernet.md) that polls every
// switch of the lab: SNMPv2c with the lab's community, or SNMPv3 authPriv
// with its user when v3 is set. edit, when not nil, may rewrite each
// switch's line (the tests point one at a relay).
func (l *Lab) NetloomConfig(v3 bool, edit func(sw string, entry *string)) string {
	var b strings.Builder
	tg := l.SNMPTargets()
	if len(tg) == 0 {
		return "switches: []\n"
	}
	if v3 {
		fmt.Fprintf(&b, "v3: {user: %q, auth_proto: %s, auth_pass: %q, priv_proto: %s, priv_pass: %q}\n",
			tg[0].V3User, tg[0].V3AuthProto, tg[0].V3AuthPass, tg[0].V3PrivProto, tg[0].V3PrivPass)
	} else {
		fmt.Fprintf(&b, "community: %q\n", tg[0].Community)
	}
	b.WriteString("switches:\n")
	for _, s := range tg {
		entry := fmt.Sprintf("  - {address: %q, name: %q}\n", s.Addr, s.Switch)
		if edit != nil {
			edit(s.Switch, &entry)
		}
		b.WriteString(entry)
	}
	return b.String()
}

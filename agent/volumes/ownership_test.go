package volumes

import (
	"io/fs"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestWithFSGroup(t *testing.T) {
	for _, tc := range []struct {
		mode          fs.FileMode
		dir, readOnly bool
		want          fs.FileMode
	}{
		{0o400, false, true, 0o440},
		{0o440, false, true, 0o440},
		{0o600, false, true, 0o640}, // the token under an fsGroup
		{0o644, false, false, 0o664},
		{0o600, false, false, 0o660},
		{0o755, true, true, 0o755 | fs.ModeSetgid},
		{0o700, true, true, 0o750 | fs.ModeSetgid},
		{0o777, true, false, 0o777 | fs.ModeSetgid},
		{0o777 | fs.ModeSticky, true, false, 0o777 | fs.ModeSticky | fs.ModeSetgid}, // a tmpfs root
		{0o700, true, false, 0o770 | fs.ModeSetgid},
	} {
		if got := withFSGroup(tc.mode, tc.dir, tc.readOnly); got != tc.want {
			t.Errorf("withFSGroup(%v, dir=%v, ro=%v) = %v, want %v", tc.mode, tc.dir, tc.readOnly, got, tc.want)
		}
	}
}

func TestFileAndDirAttrs(t *testing.T) {
	plain := ownership{uid: 0, gid: 0}
	grouped := ownership{uid: 0, gid: 0, fsGroup: ptr.To[int64](1001)}
	for _, tc := range []struct {
		name string
		o    ownership
		mode int32
		user *int64
		want attrs
	}{
		{"plain", plain, 0o644, nil, attrs{mode: 0o644}},
		{"exact", plain, 0o400, nil, attrs{mode: 0o400}},
		{"fsGroup", grouped, 0o440, nil, attrs{mode: 0o440, gid: 1001}}, // the e2e's -r--r----- group 1001
		{"fsGroup adds read", grouped, 0o400, nil, attrs{mode: 0o440, gid: 1001}},
		{"token user", plain, 0o600, ptr.To[int64](1000), attrs{mode: 0o600, uid: 1000}},
		{"token user and group", grouped, 0o600, ptr.To[int64](1000), attrs{mode: 0o640, uid: 1000, gid: 1001}},
	} {
		got, err := tc.o.fileAttrs(tc.mode, tc.user)
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.name, got, err, tc.want)
		}
	}
	for _, bad := range []int32{-1, 0o1000, 0o4755} {
		if _, err := plain.fileAttrs(bad, nil); err == nil {
			t.Errorf("mode %#o accepted", bad)
		}
	}
	if got := plain.dirAttrs(); got != (attrs{mode: 0o755}) {
		t.Errorf("dirAttrs %+v", got)
	}
	if got := grouped.dirAttrs(); got != (attrs{mode: 0o755 | fs.ModeSetgid, gid: 1001}) {
		t.Errorf("dirAttrs with fsGroup %+v", got)
	}
}

func TestFSUserOf(t *testing.T) {
	sc := func(u int64) *corev1.SecurityContext { return &corev1.SecurityContext{RunAsUser: &u} }
	psc := func(u int64) *corev1.PodSecurityContext { return &corev1.PodSecurityContext{RunAsUser: &u} }
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want *int64
	}{
		{"none", corev1.PodSpec{Containers: []corev1.Container{{}}}, nil},
		{"pod level", corev1.PodSpec{SecurityContext: psc(1000), Containers: []corev1.Container{{}, {}}}, ptr.To[int64](1000)},
		{"container overrides", corev1.PodSpec{SecurityContext: psc(1000), Containers: []corev1.Container{{SecurityContext: sc(2000)}}}, ptr.To[int64](2000)},
		{"containers differ", corev1.PodSpec{Containers: []corev1.Container{{SecurityContext: sc(1)}, {SecurityContext: sc(2)}}}, nil},
		{"init container unset", corev1.PodSpec{InitContainers: []corev1.Container{{}}, Containers: []corev1.Container{{SecurityContext: sc(1)}}}, nil},
		{"init agrees", corev1.PodSpec{InitContainers: []corev1.Container{{SecurityContext: sc(1)}}, Containers: []corev1.Container{{SecurityContext: sc(1)}}}, ptr.To[int64](1)},
		{"ephemeral differs", corev1.PodSpec{SecurityContext: psc(1), Containers: []corev1.Container{{}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{SecurityContext: sc(3)}}}}, nil},
		{"root", corev1.PodSpec{SecurityContext: psc(0), Containers: []corev1.Container{{}}}, ptr.To[int64](0)},
		{"no containers", corev1.PodSpec{SecurityContext: psc(1)}, nil},
	} {
		got := fsUserOf(&corev1.Pod{Spec: tc.spec})
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, ptr.Deref(got, -1), ptr.Deref(tc.want, -1))
		}
	}
}

func TestTokenModes(t *testing.T) {
	// The e2e "should set ownership and permission when RunAsUser or FsGroup is present".
	for _, tc := range []struct {
		name     string
		runAs    *int64
		fsGroup  *int64
		wantMode fs.FileMode
		wantUID  int
		wantGID  int
	}{
		{"runAsUser", ptr.To[int64](1000), nil, 0o600, 1000, 0},
		{"fsGroup", nil, ptr.To[int64](10000), 0o640, 0, 10000},
		{"both", ptr.To[int64](1000), ptr.To[int64](10000), 0o640, 1000, 10000},
		{"neither", nil, nil, 0o644, 0, 0},
	} {
		pod := testPod()
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: tc.runAs, FSGroup: tc.fsGroup}
		own := podOwnership(pod)
		own.uid, own.gid = 0, 0 // as the root agent
		m := New(fakeClient(nil), t.TempDir())
		ps, err := m.tokenProjection(t.Context(), pod, "v", &corev1.ServiceAccountTokenProjection{Path: "token"}, defaultMode, own)
		if err != nil {
			t.Fatal(err)
		}
		files, err := own.files(ps)
		if err != nil {
			t.Fatal(err)
		}
		got := files["token"].attrs
		if got != (attrs{mode: tc.wantMode, uid: tc.wantUID, gid: tc.wantGID}) {
			t.Errorf("%s: %+v, want mode %v uid %d gid %d", tc.name, got, tc.wantMode, tc.wantUID, tc.wantGID)
		}
	}
}

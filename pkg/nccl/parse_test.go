package nccl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func readFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParse_Layouts(t *testing.T) {
	type summary struct {
		Layout      Layout
		Rows        int
		Ranks       int
		Hosts       []string
		TopBusBW    float64
		Wrong       int64
		WrongKnown  bool
		OutOfBounds int64
		Warnings    int
	}
	cases := []struct {
		file string
		want summary
	}{
		{"allreduce-text.txt", summary{LayoutText, 4, 16, []string{"gpu-a-0", "gpu-a-1"}, 370, 0, true, 0, 0}},
		{"allreduce-na.txt", summary{LayoutText, 4, 16, []string{"gpu-a-0", "gpu-a-1"}, 370, 0, false, 0, 0}},
		{"allreduce-wrong.txt", summary{LayoutText, 4, 16, []string{"gpu-a-0", "gpu-a-1"}, 370, 12, true, 1, 0}},
		{"allreduce-legacy.txt", summary{LayoutTextLegacy, 4, 16, []string{"gpu-a-0", "gpu-a-1"}, 300, 0, false, 0, 0}},
		{"allreduce-tagged.txt", summary{LayoutText, 4, 16, []string{"gpu-a-0", "gpu-a-1"}, 370, 0, true, 0, 1}},
		{"allreduce-report.json.txt", summary{LayoutJSON, 4, 16, []string{"gpu-a-0", "gpu-a-1"}, 370, 0, true, 0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			res, err := ParseString(readFixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			top, ok := res.Row(DefaultGateSize)
			if !ok {
				t.Fatalf("no 8G row in %+v", res.Rows)
			}
			got := summary{Layout: res.Layout, Rows: len(res.Rows), Ranks: res.Ranks, Hosts: res.Hosts,
				TopBusBW: top.OutOfPlace.BusBW, Wrong: res.WrongTotal(), WrongKnown: top.OutOfPlace.Wrong != nil,
				Warnings: len(res.NCCLWarnings)}
			if res.OutOfBounds != nil {
				got.OutOfBounds = *res.OutOfBounds
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestParse_NoResults(t *testing.T) {
	for _, in := range []string{"", "hello\n", "# size count busbw\n", "{\"results\": \"x\"}\n", "1 2 3\n"} {
		if _, err := ParseString(in); err != ErrNoResults {
			t.Errorf("Parse(%q) err = %v, want ErrNoResults", in, err)
		}
	}
}

func TestParse_HeaderlessRows(t *testing.T) {
	in := "  8589934592    2147483648     float     sum      -1  43530.1  197.33  370.00     N/A  43530.1  197.33  370.00     N/A\n" +
		"  4294967296    1073741824   float     sum  27769.2  154.67  290.00  0e+00  27769.2  154.67  290.00  0e+00\n"
	res, err := ParseString(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 || res.Rows[0].Root != "-1" || res.Rows[1].Root != "" || res.Rows[1].OutOfPlace.Error == nil {
		t.Errorf("rows = %+v", res.Rows)
	}
}

func TestParse_TimestampedTagOutput(t *testing.T) {
	in := "Tue Dec  1 10:00:00 2026[1,0]<stdout>:  8589934592    2147483648     float     sum      -1  43530.1  197.33  370.00       3  43530.1  197.33  370.00       0  2026-12-01 10:00:00\n"
	res, err := ParseString(in)
	if err != nil {
		t.Fatal(err)
	}
	if res.WrongTotal() != 3 {
		t.Errorf("wrong = %d, want 3", res.WrongTotal())
	}
}

func TestParse_JSONWithNaN(t *testing.T) {
	in := `{"results":[{"size":8589934592,"count":2147483648,"type":"float","redop":"sum","root":"-1","out_of_place":{"time":"nan","alg_bw":1,"bus_bw":"nan","nwrong":null},"in_place":{"time":5,"alg_bw":2,"bus_bw":3.5,"nwrong":2}}],"errors":["unhandled cuda error"]}`
	res, err := ParseString("junk {\nmore\n" + in)
	if err != nil {
		t.Fatal(err)
	}
	row, _ := res.Row(DefaultGateSize)
	if row.OutOfPlace.Valid || !row.InPlace.Valid || res.WrongTotal() != 2 || len(res.Errors) != 1 {
		t.Errorf("res = %+v", res)
	}
}

func TestParseBytesAndTolerance(t *testing.T) {
	for in, want := range map[string]int64{"8G": 8 << 30, "8GiB": 8 << 30, "512M": 512 << 20, "1024": 1024, "1k": 1024} {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "G", "-1", "x", "99999999999T"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) succeeded", bad)
		}
	}
	for in, want := range map[string]float64{"10%": 0.1, "10": 0.1, "0.05": 0.05, "0": 0, "2.5%": 0.025} {
		got, err := ParseTolerance(in)
		if err != nil || got != want {
			t.Errorf("ParseTolerance(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "abc", "100%", "-5%", "NaN"} {
		if _, err := ParseTolerance(bad); err == nil {
			t.Errorf("ParseTolerance(%q) succeeded", bad)
		}
	}
	if FormatBytes(8<<30) != "8G" || FormatBytes(1000) != "1000" {
		t.Error("FormatBytes")
	}
}

func FuzzParse(f *testing.F) {
	entries, _ := os.ReadDir("testdata")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "allreduce-") {
			b, _ := os.ReadFile(filepath.Join("testdata", e.Name()))
			f.Add(string(b))
		}
	}
	f.Add("[1,0]<stdout>:  8 2 float sum -1 1 2 3 N/A 1 2 3 N/A\n")
	f.Add(`{"results":[{"size":"nan","out_of_place":{"bus_bw":1e400}}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		res, err := ParseString(s)
		if err == nil && len(res.Rows) == 0 {
			t.Fatal("nil error without rows")
		}
		if res != nil {
			_ = Gate(GateInput{Result: res, Baseline: &Baseline{BusBW: 100}})
			_ = res.WrongTotal()
		}
	})
}

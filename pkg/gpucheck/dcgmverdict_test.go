package gpucheck

import (
	"bytes"
	"strings"
	"testing"
)

func dcgmMessages(fs []Finding) string {
	var msgs []string
	for _, f := range fs {
		msgs = append(msgs, string(f.Level)+": "+f.Message)
	}
	return strings.Join(msgs, "\n")
}

// The fixtures are check pod logs (DCGMCommand): dcgmi's JSON, the exit
// line, its table, the exit line. Each follows DCGM's writers at its tag:
// dcgmi/Diag.cpp (HelperJsonAddBasicTests and HelperJsonAddResult at
// v3.2.6 and v3.3.8; HelperJsonBuildOutput, HelperJsonAddResult,
// HelperJsonAddTestSummary, HelperDisplayGlobalResult and
// HelperDisplayEntityResults at v4.4.2; HelperDisplayFailureMessage),
// printed by jsoncpp 1.9.5's toStyledString (the version
// dcgmbuild/scripts/0030_jsoncpp.sh builds: keys sorted, tab indents, every
// array on its own lines) and CommandOutputController's padded cells
// wrapped at 45 characters; the messages are DCGM_FR_*_MSG and _NEXT of
// dcgmlib/dcgm_errors.h at the tag, raised as the Software plugin raises
// them (see dcgm-level1.csv); the runtime error is the text of the real
// 4.4.1 capture in ../shared/real-outputs/dcgm.
func TestDCGMOwnVerdictPerReleaseLine(t *testing.T) {
	cases := []struct {
		file    string
		line    string
		status  Status
		flagged Status // with --dcgm-warn-fails
		basis   string
		message string
	}{
		{"dcgm-4.4.2-level1-pass.log", "4", StatusPass, StatusPass, DCGMBasisPrinted, "info: DCGM level 1: 1 tests passed"},
		// DCGM_FR_FIELD_QUERY is MONITOR, and DCGM fails the test on it
		// (Software.cpp v4.4.2 checkRowRemapping SetResultForGpu FAIL):
		// the gate used to warn here and exit 0.
		{"dcgm-4.4.2-level1-fail-field-query.log", "4", StatusFail, StatusFail, DCGMBasisTable,
			"fail: DCGM Deployment/software failed on GPU3: Could not query field row_remap_pending for GPU 3: No data is available (-14) (error 27 DCGM_FR_FIELD_QUERY, severity MONITOR)"},
		// DCGM's own warning (Warn in the table, "Fail" in -j, CONFIG).
		{"dcgm-4.4.2-level1-warn-persistence.log", "4", StatusWarn, StatusFail, DCGMBasisTable,
			"warning: DCGM Deployment/software warned: Persistence mode for GPU 0 is disabled. Enable persistence mode by running \"nvidia-smi -i <gpuId> -pm 1 \" as root. (error 29 DCGM_FR_PERSISTENCE_MODE, severity CONFIG) (and 7 more); fix: enable persistence mode on the node as root (`nvidia-smi -pm 1` or the nvidia-persistenced service) and rerun"},
		// 3.3.8 prints the warning as Fail in both outputs; its exit status
		// 0 says nothing failed.
		{"dcgm-3.3.8-level1-warn-env.log", "3.3", StatusWarn, StatusFail, DCGMBasisExitStatus,
			"warning: DCGM Deployment/Environment Variables warned: Found CUDA performance-limiting environment variable 'CUDA_DEVICE_WAITS_ON_EXCEPTION'. Please unset this environment variable to address test failures. (error 28 DCGM_FR_BAD_CUDA_ENV, severity CONFIG); fix: unset the environment variable DCGM names in the --dcgm-image and rerun"},
		// 3.2.6 writes no code for a level-one test: the message names it.
		{"dcgm-3.2.6-level1-warn-graphics.log", "3.2", StatusWarn, StatusFail, DCGMBasisExitStatus,
			"warning: DCGM Deployment/Graphics Processes warned: NVVS has detected processes with graphics contexts open"},
		{"dcgm-4.4.2-level1-runtime-error.log", "4", StatusFail, StatusFail, "",
			"fail: dcgmi diag runtime error: Unable to complete diagnostic. Return: (-30) : DCGM GPU Diagnostic returned an error; Cannot load plugins. Unable to change to the plugin dir '/usr/libexec/datacenter-gpu-manager-4/plugins/cuda12/': 'No such file or directory'"},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			r, err := ParseDCGM(bytes.NewReader(fixture(t, tc.file)))
			if err != nil {
				t.Fatal(err)
			}
			fs := DCGMFindings(r, false)
			if StatusOf(fs) != tc.status || r.Line != tc.line || !strings.Contains(dcgmMessages(fs), tc.message) {
				t.Errorf("status %s line %q\n%s", StatusOf(fs), r.Line, dcgmMessages(fs))
			}
			if got := StatusOf(DCGMFindings(r, true)); got != tc.flagged {
				t.Errorf("with --dcgm-warn-fails: %s, want %s", got, tc.flagged)
			}
			if tc.basis != "" && (len(r.Tests) == 0 || r.Tests[0].Basis != tc.basis && !hasBasis(r, tc.basis)) {
				t.Errorf("basis: %+v, want %s", r.Tests, tc.basis)
			}
			if len(r.Runs) != 2 || r.Runs[0].Output == r.Runs[1].Output || r.Runs[0].ExitStatus == nil {
				t.Errorf("runs %+v", r.Runs)
			}
		})
	}
}

func hasBasis(r *DCGMResult, b string) bool {
	for _, t := range r.Tests {
		if t.Status != "Pass" && t.Basis == b {
			return true
		}
	}
	return false
}

// parts of a fixture: the JSON run (with its exit line) and the table run.
func dcgmRunsOf(t *testing.T, file string) (jsonRun, tableRun string) {
	t.Helper()
	b := string(fixture(t, file))
	i := strings.Index(b, "-j exited ")
	nl := strings.IndexByte(b[i:], '\n')
	return b[:i+nl+1], b[i+nl+1:]
}

// TestDCGMEachOutputAlone: the verdict holds on either output alone, and on
// the JSON without its exit line, the way it cannot be told apart there.
func TestDCGMEachOutputAlone(t *testing.T) {
	noExit := func(s string) string { return dcgmExitRe.ReplaceAllString(s, "") }
	type outputCase struct {
		name, text string
		status     Status
		basis      string
	}
	var cases []outputCase
	add := func(file string, jsonStatus, jsonBare, tableStatus Status, jsonBasis, bareBasis, tableBasis string) {
		j, tb := dcgmRunsOf(t, file)
		cases = append(cases,
			outputCase{file + "/json", j, jsonStatus, jsonBasis},
			outputCase{file + "/json-without-exit", noExit(j), jsonBare, bareBasis},
			outputCase{file + "/table", tb, tableStatus, tableBasis})
	}
	// 4.x: -j alone writes FIELD_QUERY and persistence alike ("Fail"); the
	// level-1 data tells them apart (Fail / Warn at v4.4.2).
	add("dcgm-4.4.2-level1-fail-field-query.log", StatusFail, StatusFail, StatusFail, DCGMBasisUnresolved, DCGMBasisUnresolved, DCGMBasisTable)
	add("dcgm-4.4.2-level1-warn-persistence.log", StatusWarn, StatusWarn, StatusWarn, DCGMBasisLevel1Codes, DCGMBasisLevel1Codes, DCGMBasisTable)
	// 3.x: the exit status decides; without it, the code (3.3) or the
	// message (3.2) does.
	add("dcgm-3.3.8-level1-warn-env.log", StatusWarn, StatusWarn, StatusWarn, DCGMBasisExitStatus, DCGMBasisLevel1Codes, DCGMBasisExitStatus)
	add("dcgm-3.2.6-level1-warn-graphics.log", StatusWarn, StatusWarn, StatusWarn, DCGMBasisExitStatus, DCGMBasisLevel1Codes, DCGMBasisExitStatus)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseDCGM(strings.NewReader(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			fs := DCGMFindings(r, false)
			if StatusOf(fs) != tc.status || !hasBasis(r, tc.basis) {
				t.Errorf("status %s %+v\n%s", StatusOf(fs), r.Tests, dcgmMessages(fs))
			}
		})
	}
}

// TestDCGMFailedWhateverTheSeverity: a test DCGM failed fails the gate
// whatever its warnings' severity. DCGM_FR_CUDA_API is MONITOR at every tag
// (dcgm-error-severity.csv) and fails the GPU Memory test: in the real
// 3.3.8 capture as a table, and here as dcgmi 3.3.8 writes the same run
// with -j (Diag.cpp v3.3.8 HelperJsonAddResult: "gpu_id" as a string,
// warning objects), with and without the exit status the pod records.
func TestDCGMFailedWhateverTheSeverity(t *testing.T) {
	var results []string
	for g := 0; g < 2; g++ {
		id := string(rune('0' + g))
		results = append(results, `{"gpu_id":"`+id+`","status":"Fail","warnings":[{"error_category":6,"error_id":51,"error_severity":1,"warning":"GPU `+id+` Error using CUDA API cuInit Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics. Unable to initialize CUDA library: 'system not yet initialized'. . Please check if a CUDA sample program can be run successfully on this host. Refer to https://github.com/nvidia/cuda-samples"}]}`)
	}
	doc := `{"DCGM GPU Diagnostic":{"test_categories":[{"category":"Hardware","tests":[{"name":"GPU Memory","results":[` + strings.Join(results, ",") + `]}]}]},"GPU Device IDs":["2330","2330"],"version":"3.3.8"}` + "\n"
	for name, text := range map[string]string{
		"json":                 doc,
		"json with its status": doc + "gpu-validate: dcgmi diag -r 3 -j exited 226\n",
	} {
		r, err := ParseDCGM(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		fs := DCGMFindings(r, false)
		if StatusOf(fs) != StatusFail || !strings.Contains(dcgmMessages(fs), "DCGM Hardware/GPU Memory failed on GPU0 GPU1: GPU 0 Error using CUDA API cuInit") ||
			!strings.Contains(dcgmMessages(fs), "(error 51 DCGM_FR_CUDA_API, severity MONITOR)") {
			t.Errorf("%s: %s", name, dcgmMessages(fs))
		}
	}
	// The same status with exit 0 cannot be DCGM 3's own failure: a
	// warning (or a test that did not run).
	r, _ := ParseDCGM(strings.NewReader(doc + "gpu-validate: dcgmi diag -r 3 -j exited 0\n"))
	if fs := DCGMFindings(r, false); StatusOf(fs) != StatusWarn {
		t.Errorf("exit 0: %s", dcgmMessages(fs))
	}
}

// TestDCGMExitStatus: what dcgmi's exit status adds where no test says it.
func TestDCGMExitStatus(t *testing.T) {
	j, _ := dcgmRunsOf(t, "dcgm-3.3.8-level1-warn-env.log")
	j3 := strings.Replace(j, "exited 0", "exited 226", 1)
	// 3.x exits DCGM_ST_NVVS_ERROR only for a failed result: the one test
	// read as a warning from its code is the one that failed.
	r, _ := ParseDCGM(strings.NewReader(j3))
	if fs := DCGMFindings(r, false); StatusOf(fs) != StatusFail || r.Tests[5].Basis != DCGMBasisExitStatus {
		t.Errorf("3.x 226: %+v\n%s", r.Tests[5], dcgmMessages(fs))
	}
	// With nothing to pin it on, the status itself fails the run.
	pass, _ := dcgmRunsOf(t, "dcgm-4.4.2-level1-pass.log")
	for _, tc := range []struct {
		log, want string
	}{
		{strings.Replace(pass, "exited 0", "exited 205", 1), "DCGM failed the run: dcgmi diag -r 1 -j exited 205 DCGM_ST_NVVS_ISOLATE_ERROR (-51)"},
		{strings.Replace(pass, "exited 0", "exited 203", 1), "DCGM failed the run: dcgmi diag -r 1 -j exited 203 DCGM_ST_NVVS_KILLED (-53)"},
		{"sh: 1: dcgmi: not found\ngpu-validate: dcgmi diag -r 1 -j exited 127\n", "dcgmi diag runtime error: dcgmi diag -r 1 -j exited 127 without a result: sh: 1: dcgmi: not found"},
	} {
		r, err := ParseDCGM(strings.NewReader(tc.log))
		if err != nil {
			t.Fatal(err)
		}
		if fs := DCGMFindings(r, false); StatusOf(fs) != StatusFail || !strings.Contains(dcgmMessages(fs), tc.want) {
			t.Errorf("%s", dcgmMessages(fs))
		}
	}
	// 4.x exits DCGM_ST_NVVS_ERROR on a warning too: that alone fails
	// nothing (the persistence fixture records 226 for both runs).
	w, _ := dcgmRunsOf(t, "dcgm-4.4.2-level1-warn-persistence.log")
	if r, _ := ParseDCGM(strings.NewReader(w)); r.ExitFailure != "" {
		t.Errorf("4.x 226: %q", r.ExitFailure)
	}
}

// TestDCGMTableEntityWarnings: a 4.x "Warning: GPU0" row is the text of
// the test above it, not a test, and the entity rows' "Fail" (how dcgmi
// writes a warned entity) does not turn the test's Warn into a failure.
func TestDCGMTableEntityWarnings(t *testing.T) {
	_, tb := dcgmRunsOf(t, "dcgm-4.4.2-level1-warn-persistence.log")
	out, ok := parseDCGMTable([]byte(tb))
	if !ok || len(out.tests) != 1 {
		t.Fatalf("%d tests: %+v", len(out.tests), out.tests)
	}
	s := out.tests[0]
	if s.name != "software" || s.word != "Warn" || !s.own || len(s.warnings) != 8 ||
		s.warnings[7].Msg != `Persistence mode for GPU 7 is disabled. Enable persistence mode by running "nvidia-smi -i <gpuId> -pm 1 " as root.` {
		t.Errorf("%+v", s)
	}
	_, tb = dcgmRunsOf(t, "dcgm-4.4.2-level1-fail-field-query.log")
	out, _ = parseDCGMTable([]byte(tb))
	if s := out.tests[0]; s.word != "Fail" || len(s.failed) != 1 || s.failed[0] != "GPU3" || len(s.warnings) != 1 ||
		s.warnings[0].Msg != "Could not query field row_remap_pending for GPU 3: No data is available (-14)" {
		t.Errorf("%+v", s)
	}
	// A 3.x per-GPU test with mixed results keeps the failed GPU of its
	// continuation row ("Pass - GPUs: 0, 2" then "Fail - GPU: 1",
	// HelperDisplayGpuResults v3.3.8) and tells Warn apart.
	mixed := "|-----  Metadata  ----------+------------------------------------------------|\n" +
		"| DCGM Version              | 3.3.9                                          |\n" +
		"+-----  Stress  ------------+------------------------------------------------+\n" +
		"| Targeted Power            | Pass - GPUs: 0, 2, 3                           |\n" +
		"|                           | Fail - GPU: 1                                  |\n" +
		"| Warning                   | GPU 1 x                                        |\n" +
		"| Memory Bandwidth          | Warn - All                                     |\n"
	out, _ = parseDCGMTable([]byte(mixed))
	if len(out.tests) != 2 || out.tests[0].word != "Fail" || !out.tests[0].own || len(out.tests[0].failed) != 1 || out.tests[1].word != "Warn" || !out.tests[1].own {
		t.Errorf("%+v", out.tests)
	}
}

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"temper.codes/temper-train/internal/atomicfile"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/synthesize"
)

func newProfilesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profiles",
		Short: "Work with a repository of profiles (profiles/ID/SHAPE.toml)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError{errors.New("profiles needs a subcommand: profiles export --helm DIR [PROFILES_DIR]")}
		},
	}
	cmd.AddCommand(newProfilesExportCmd())
	return cmd
}

func newProfilesExportCmd() *cobra.Command {
	var helmDir string
	cmd := &cobra.Command{
		Use:   "export --helm DIR [PROFILES_DIR]",
		Short: "Export every profile of a profiles repository as values for the agent's Helm chart",
		Long: `Export reads a profiles repository (PROFILES_DIR, default profiles: every
ID/SHAPE.toml, the layout synthesize writes and the canary loop commits), checks
that each profile loads and lints without errors, and writes DIR/values.yaml:
every profile under agent.profiles, which the agent's chart renders into the
ConfigMap the agent mounts.

Keys are the ones synthesize --export helm uses: ID.toml for an id with one
shape; ID_SHAPE.toml for each shape of an id with several (the agent reads id
and shape from the TOML). It prints the two ways to deploy them: the values
file, and one helm upgrade with a --set-file per profile (which also deletes the
ID.toml key an earlier single-shape deployment of such an id left).`,
		Example: `  temper-train profiles export --helm deploy/out profiles
  helm upgrade temper deploy/helm/temper --reuse-values -f deploy/out/values.yaml`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if helmDir == "" {
				return usageError{errors.New("export needs --helm DIR (the only export there is)")}
			}
			repo := "profiles"
			if len(a) == 1 {
				repo = a[0]
			}
			return runProfilesExport(cmd.OutOrStdout(), repo, helmDir)
		},
	}
	cmd.Flags().StringVar(&helmDir, "helm", "", "write DIR/values.yaml for the agent's Helm chart")
	return cmd
}

func runProfilesExport(stdout io.Writer, repo, dir string) error {
	if fi, err := os.Stat(repo); err != nil || !fi.IsDir() {
		return fmt.Errorf("profiles directory %s: not a directory (give the repository's profiles/, which holds ID/SHAPE.toml)", repo)
	}
	cands, err := profiles.LoadDir(repo)
	if err != nil {
		return err
	}
	if len(cands) == 0 {
		return fmt.Errorf("%s holds no profiles (want ID/SHAPE.toml files)", repo)
	}
	for _, c := range cands {
		if fd, bad := profiles.FirstError(profiles.Lint(c.Profile, profiles.LintOptions{})); bad {
			return fmt.Errorf("%s: %s (fix it, or check with temper-train lint %s)", c.Source, lintFinding(fd), c.Source)
		}
	}
	entries, remove, err := synthesize.HelmRepo(cands, os.ReadFile)
	if err != nil {
		return err
	}
	values, err := synthesize.HelmRepoValues(entries)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--helm %s: %w", dir, err)
	}
	path := filepath.Join(dir, "values.yaml")
	if err := atomicfile.Write(path, 0o644, func(w io.Writer) error {
		_, err := w.Write(values)
		return err
	}); err != nil {
		return fmt.Errorf("--helm: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s: %d profiles\n", path, len(entries))
	for _, e := range entries {
		fmt.Fprintf(stdout, "  %-40s %s\n", e.Key, e.Source)
	}
	fmt.Fprintf(stdout, "deploy with the values file:\n  %s\nor from the profiles themselves:\n  %s\n",
		synthesize.HelmValuesCommand(path), synthesize.HelmSetFileCommand(entries, remove))
	return nil
}

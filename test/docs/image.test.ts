// The charts run an image no public registry holds (`image.repository`
// switchyard, tagged with the chart's appVersion), so the Helm install in
// docs/operations.md must say how to build and name it, with the tag the
// charts expect: a reader who installs as shown otherwise gets pods stuck
// pulling an image that does not exist.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';

const root = join(import.meta.dirname, '../..');
const text = (file: string): string => readFileSync(join(root, file), 'utf8');
const CHARTS = readdirSync(join(root, 'charts'));

/** The "Install with Helm" section of docs/operations.md, up to the next `## ` heading. */
function installSection(): string {
  const doc = text('docs/operations.md');
  const start = doc.indexOf('\n## Install with Helm\n');
  assert.ok(start >= 0, 'docs/operations.md has an "Install with Helm" section');
  const end = doc.indexOf('\n## ', start + 1);
  return doc.slice(start, end < 0 ? undefined : end);
}

it("the Helm install says how to build the image the charts run, with the charts' tag", () => {
  const section = installSection();
  const built = /docker build -t ([\w./:-]+):([\w.-]+) \./.exec(section);
  assert.ok(built, 'a `docker build -t <repository>:<tag> .` command');
  for (const chart of CHARTS) {
    const { appVersion } = parse(text(`charts/${chart}/Chart.yaml`)) as { appVersion: string };
    const { image } = parse(text(`charts/${chart}/values.yaml`)) as { image: { repository: string; tag: string } };
    assert.equal(image.tag, '', `${chart}: the tag defaults to the appVersion`);
    assert.equal(built[2], appVersion, `${chart}: the documented tag is the chart's appVersion`);
    assert.ok(built[1]!.endsWith(image.repository), `${chart}: the documented name ends in ${image.repository}`);
  }
  assert.match(section, /--set image\.repository=/, 'how to point the charts at the pushed image');
});

it('the image the Helm install loads into kind is one it built, under the name the charts run', () => {
  const section = installSection();
  const loaded = [...section.matchAll(/kind load docker-image ([\w./:-]+)/g)].map((m) => m[1]!);
  assert.ok(loaded.length > 0, 'says how to load the image into a kind cluster');
  // Images the section makes: built (`docker build -t`) or named again (`docker tag <from> <to>`).
  const made = [
    ...[...section.matchAll(/docker build -t ([\w./:-]+) \./g)].map((m) => m[1]!),
    ...[...section.matchAll(/docker tag [\w./:-]+ ([\w./:-]+)/g)].map((m) => m[1]!),
  ];
  for (const chart of CHARTS) {
    const { appVersion } = parse(text(`charts/${chart}/Chart.yaml`)) as { appVersion: string };
    const { image } = parse(text(`charts/${chart}/values.yaml`)) as { image: { repository: string } };
    // kind runs what it was given under that very name: the charts' default repository, with no --set.
    for (const name of loaded) {
      assert.ok(
        made.includes(name),
        `kind loads ${name}, which the section never builds (it makes ${made.join(', ')})`,
      );
      assert.equal(name, `${image.repository}:${appVersion}`, `${chart}: kind loads the image the chart runs`);
    }
  }
});

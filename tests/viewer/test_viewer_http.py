"""The viewer's routes over HTTP (FastAPI's TestClient, the real application on real toy runs): the index agrees
with the report, filters select what the runs hold, paging and sorting, one chain, the compare view, and 404 pages
for what does not exist, including paths that try to leave the run directory."""

from __future__ import annotations

import math
import re
from html import escape, unescape

import pytest
from fastapi.testclient import TestClient

from recovery.report import ReportData
from recovery.report.tables import detail_table
from recovery.run_dir import open_run
from recovery.viewer.app import Viewer, create_app


@pytest.fixture(scope="module")
def viewer(before_run, after_run):
    return Viewer.load(before_run.path, after_run.path)


@pytest.fixture(scope="module")
def client(viewer):
    return TestClient(create_app(viewer))


def total(response) -> int:
    assert response.status_code == 200, response.text
    return int(re.search(r"id=total>([\d,]+) chains", response.text).group(1).replace(",", ""))


def chain_ids(response) -> list[str]:
    return re.findall(r'href="/chain/([0-9a-f]+)"', response.text)


def test_the_index_shows_each_cell_with_the_reports_figures(client, before_run):
    """The viewer's figures of a cell are the strings the report's detail table shows for the same cell."""
    page = client.get("/cells").text
    data = ReportData.from_dicts(open_run(before_run.path).aggregates())
    (table,) = [detail_table(data, domain) for domain in data.domains()]
    assert len(table.rows) == 6  # 3 interventions × 2 timesteps
    for row in table.rows:
        model, intervention, t, *figures = row
        cells = "".join(f"<td class=r>{escape(f)}</td>" for f in figures)
        assert f"<td>{escape(t)}</td>{cells}" in page, (intervention, t)
    majority = data.rows[0]["majority_mean"]
    assert f"{majority:.3f}" in page


def test_a_cell_links_to_its_chains(client, before_run):
    page = client.get("/cells").text
    link = unescape(re.search(r'href="(/chains\?[^"]+)"', page).group(1))
    assert "intervention=" in link and "t=" in link
    listed = client.get(link)
    assert total(listed) == 6  # one chain per problem in a cell
    assert len(set(chain_ids(listed))) == 6


def test_filters_select_what_the_run_holds(client, before_run):
    everything = len(before_run.chains)
    assert total(client.get("/chains")) == everything
    assert total(client.get("/chains?outcome=mixed")) == everything
    assert total(client.get("/chains?outcome=recovered")) == 0
    assert total(client.get("/chains?verdict=wrong")) == everything
    assert total(client.get("/chains?category=benign")) == everything // 3
    assert total(client.get("/chains?intervention=toy/complete_step&t=0.3")) == len(before_run.problems)
    problem = before_run.problems[0]
    searched = client.get("/chains", params={"q": problem.question})
    assert total(searched) == 6
    assert {c.problem_id for _, c in before_run.chains if c.id in chain_ids(searched)} == {problem.id}


def test_the_doubt_filter_splits_the_chains(client, before_run):
    yes, no = client.get("/chains?doubt=yes&size=500"), client.get("/chains?doubt=no&size=500")
    assert total(yes) + total(no) == len(before_run.chains)
    assert total(yes) > 0
    chain = client.get(f"/chain/{chain_ids(yes)[0]}").text
    assert '<mark class="doubt">' in chain
    if total(no):
        assert '<mark class="doubt">' not in client.get(f"/chain/{chain_ids(no)[0]}").text


def test_paging_and_sorting(client, before_run):
    first, second = client.get("/chains?size=10&page=1"), client.get("/chains?size=10&page=2")
    assert len(chain_ids(first)) == 10 and not set(chain_ids(first)) & set(chain_ids(second))
    pages = math.ceil(len(before_run.chains) / 10)
    assert f"page 1 of {pages}" in first.text and 'rel="next"' in first.text
    past = client.get(f"/chains?size=10&page={pages + 1}")
    assert past.status_code == 404 and f"no page {pages + 1}" in past.text
    by_t = client.get("/chains?sort=t&order=desc&size=500").text
    ts = [float(t) for t in re.findall(r"<td>(0\.\d+)</td><td><span class=\"outcome\">", by_t)]
    assert ts == sorted(ts, reverse=True) and len(ts) == len(before_run.chains)


def test_one_chain(client, before_run):
    problem, chain = next((p, c) for p, c in before_run.chains if c.intervention == "toy/complete_step")
    page = client.get(f"/chain/{chain.id}").text
    assert f'<mark class="inserted">{escape(chain.inserted_text)}</mark>' in page
    assert "✂ cut" in page and escape(problem.question) in page and f"<dd>{escape(problem.answer)}</dd>" in page
    assert page.count('<div class="cont"') == 2
    assert "verdict-correct" in page and "verdict-wrong" in page
    assert "id=replaced" in page  # complete_step replaces the step at the cut


def test_compare_lists_the_chains_whose_outcome_changed(client, before_run):
    improved = client.get("/compare?direction=improved")
    assert total(improved) == len(before_run.chains)
    assert total(client.get("/compare?direction=worsened")) == 0
    assert (
        total(client.get("/compare?direction=improved&intervention=toy/complete_step")) == len(before_run.chains) // 3
    )
    first, second = client.get("/compare?size=20"), client.get("/compare?size=20&page=2")
    on_first = re.findall(r'href="/compare/([0-9a-f]+)"', first.text)
    assert len(on_first) == 20 and not set(on_first) & set(re.findall(r'href="/compare/([0-9a-f]+)"', second.text))
    chain_id = re.search(r'href="/compare/([0-9a-f]+)"', improved.text).group(1)
    side = client.get(f"/compare/{chain_id}").text
    assert "id=before" in side and "id=after" in side
    assert "mixed (1 of 2 correct)" in side and "recovered (2 of 2 correct)" in side
    assert f'href="/compare/{chain_id}"' in client.get(f"/chain/{chain_id}").text


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("/chain/0123456789abcdef", "no chain '0123456789abcdef'"),
        ("/chains?intervention=nope", "no intervention 'nope'"),
        ("/chains?t=0.55", "no timestep t=0.55"),
        ("/chains?t=abc", "t='abc' is not a number"),
        ("/chains?outcome=maybe", "no outcome 'maybe'"),
        ("/chains?verdict=great", "no verdict 'great'"),
        ("/chains?colour=red", "no filter 'colour'"),
        ("/compare?direction=sideways", "no direction 'sideways'"),
        ("/compare/0123456789abcdef", "no chain '0123456789abcdef'"),
        ("/nowhere", "no page '/nowhere'"),
    ],
)
def test_what_does_not_exist_is_a_404_naming_it(client, url, named):
    response = client.get(url)
    assert response.status_code == 404
    assert escape(named) in response.text


@pytest.mark.parametrize(
    "path", ["/chain/..%2F..%2Fconfig.json", "/chain/../config.json", "/..%2Fconfig.json", "/%2e%2e/%2e%2e/etc/passwd"]
)
def test_no_path_leaves_the_run_directory(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert '"run_dir"' not in response.text and "root:" not in response.text


def test_without_a_second_run_compare_is_a_404(before_run):
    alone = TestClient(create_app(Viewer.load(before_run.path)))
    response = alone.get("/compare")
    assert response.status_code == 404 and "--compare" in response.text
    assert 'href="/compare"' not in alone.get("/cells").text

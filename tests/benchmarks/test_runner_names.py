"""A result written under a forced kernel set gets its own file name, so the runs of both
kernel sets that the performance docs ask for do not overwrite each other."""

from benchmarks import runner


def test_a_forced_kernel_set_is_part_of_the_result_name(monkeypatch):
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    assert runner.result_name("magrpo_random", "tiny", "cpu") == "magrpo_random-tiny-cpu.json"
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    assert (
        runner.result_name("magrpo_random", "tiny", "cuda:0") == "magrpo_random-tiny-cuda-avx2.json"
    )

"""tools/torch_to_safetensors.py on small files: names, dtypes and values kept (a checkpoint's dict
under "state_dict" or "model", non-contiguous and tied tensors included), and each refusal a
sentence naming what is wrong. Run with a Python holding torch and safetensors:
    python torch_to_safetensors_test.py
"""
import contextlib
import io
import os
import subprocess
import sys
import tempfile
import types
import unittest

import torch
from safetensors.torch import load_file

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
CONVERTER = os.path.join(TOOLS, "torch_to_safetensors.py")
sys.path.insert(0, TOOLS)
import torch_to_safetensors  # noqa: E402


def run_command_line(source, target):
    """The converter as a user runs it: its own process."""
    return subprocess.run([sys.executable, CONVERTER, source, target], capture_output=True, text=True)


def convert(source, target):
    """The converter's main in this process (a process each would import torch again: seconds),
    with its exit status and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = torch_to_safetensors.main([source, target])
    return types.SimpleNamespace(returncode=status, stdout=out.getvalue(), stderr=err.getvalue())


class TorchToSafetensorsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def save(self, obj, name="in.pth"):
        torch.save(obj, self.path(name))
        return self.path(name)

    def expect_refused(self, source, *phrases):
        result = convert(source, self.path("out.safetensors"))
        self.assertNotEqual(result.returncode, 0, result.stdout)
        for phrase in phrases:
            self.assertIn(phrase, result.stderr)
        self.assertFalse(os.path.exists(self.path("out.safetensors")))

    def test_names_dtypes_and_values_are_kept(self):
        weight = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        state = {
            "conv.weight": weight.t(),  # not contiguous
            "fc.weight": weight,
            "decoder.weight": weight,  # tied to fc.weight
            "half": torch.ones(2, dtype=torch.float16),
            "bn.num_batches_tracked": torch.tensor(7),
            "double": torch.full((1,), 0.5, dtype=torch.float64),
        }
        result = run_command_line(self.save(state), self.path("out.safetensors"))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("wrote 6 tensors", result.stdout)
        written = load_file(self.path("out.safetensors"))
        self.assertEqual(sorted(written), sorted(state))
        for name, tensor in state.items():
            self.assertEqual(written[name].dtype, tensor.dtype, name)
            self.assertTrue(torch.equal(written[name], tensor), name)

    def test_a_checkpoint_dict_is_read_under_state_dict_or_model(self):
        for key in ("state_dict", "model"):
            source = self.save({key: {"w": torch.ones(2)}, "epoch": 3}, f"{key}.pth")
            result = convert(source, self.path(f"{key}.safetensors"))
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(list(load_file(self.path(f"{key}.safetensors"))), ["w"])

    def test_a_missing_file_is_named(self):
        self.expect_refused(self.path("nothing.pth"), "nothing.pth: no such file")
        result = run_command_line(self.path("nothing.pth"), self.path("out.safetensors"))
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("nothing.pth: no such file", result.stderr)

    def test_a_file_that_is_not_a_state_dict_is_refused(self):
        self.expect_refused(self.save([torch.ones(2)]), "not a state dict: torch.load gave a list")
        with open(self.path("text.pth"), "w") as f:
            f.write("not a torch file")
        self.expect_refused(self.path("text.pth"), "text.pth: torch.load cannot read it")

    def test_entries_that_are_not_tensors_are_named(self):
        self.expect_refused(self.save({"w": torch.ones(2), "epoch": 3, "lr": 0.1}),
                            "entries epoch, lr are not tensors")

    def test_dtypes_ptrain_cannot_read_are_named(self):
        self.expect_refused(self.save({"mask": torch.ones(2, dtype=torch.bool), "w": torch.ones(2)}),
                            "these are not: mask (bool)")


if __name__ == "__main__":
    unittest.main()

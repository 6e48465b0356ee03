from __future__ import annotations

import uuid

from django import forms
from django.core.files.storage import default_storage
from django.urls import reverse

from sessions.agents import RUNTIME_NAMES
from sessions.models import Attachment
from sessions.services import MAX_PROMPT_BYTES

MAX_IMAGES = 5
MAX_IMAGE_BYTES = 5 * 1024 * 1024
IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}
# The served Content-Type comes from the name, so only these names are stored.
IMAGE_SUFFIXES = {"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg",
                  "gif": "image/gif", "webp": "image/webp"}  # fmt: skip
ATTACHMENTS = "attachments"


class MultipleImageInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleImageField(forms.FileField):
    """A FileField that takes several files (a plain FileField refuses the list the widget
    returns with "No file was submitted")."""

    def clean(self, data, initial=None):
        if isinstance(data, list | tuple):
            return [super(MultipleImageField, self).clean(item, initial) for item in data]
        return [super().clean(data, initial)] if data else []


class NewSessionForm(forms.Form):
    repository = forms.ModelChoiceField(queryset=None, empty_label=None)
    branch = forms.CharField(required=False, help_text="Empty: the repository's default branch.")
    agent = forms.ChoiceField(
        choices=[], required=False, help_text="Default: the repository's, else the site's."
    )
    model = forms.CharField(
        required=False,
        max_length=200,
        help_text="The model to ask (empty: the repository's default model, else the agent's "
        "configured one, INSPECT_LLM_MODEL for the built-in agent).",
    )
    agent_command = forms.CharField(
        required=False, help_text="For the command agent: the command that does the work."
    )
    prompt = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 8}),
        help_text="What should the agent do?",
        max_length=MAX_PROMPT_BYTES,
        error_messages={"required": "The prompt is empty; say what the agent should do."},
    )
    images = MultipleImageField(
        required=False, widget=MultipleImageInput(attrs={"accept": "image/*", "multiple": True})
    )

    def __init__(self, *args, repositories, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["repository"].queryset = repositories
        self._show_default_models(repositories)
        self.fields["agent"].choices = [("", "default")] + [(n, n) for n in RUNTIME_NAMES]
        self.saved_images: list[str] = []
        self.stored_images: list[tuple[str, str]] = []  # (folder, name) in storage

    def _show_default_models(self, repositories) -> None:
        """Name each repository's default model, and preselect it when there is one choice."""
        defaults = dict(
            repositories.exclude(default_model="").values_list("name", "default_model")[:6]
        )
        if not defaults:
            return
        named = ", ".join(f"{name}: {model}" for name, model in defaults.items())
        self.fields["model"].help_text += f" Defaults: {named}."
        if not self.is_bound and len(defaults) == 1 and repositories.count() == 1:
            self.fields["model"].initial = next(iter(defaults.values()))

    def clean_prompt(self) -> str:
        text = self.cleaned_data["prompt"].strip()
        if not text:
            raise forms.ValidationError("The prompt is empty; say what the agent should do.")
        return text

    def clean_images(self):
        files = self.files.getlist("images") if self.files else []
        if len(files) > MAX_IMAGES:
            raise forms.ValidationError(f"Attach at most {MAX_IMAGES} images.")
        for upload in files:
            suffix = upload.name.rsplit(".", 1)[-1].lower() if "." in upload.name else ""
            if upload.content_type not in IMAGE_TYPES or suffix not in IMAGE_SUFFIXES:
                raise forms.ValidationError(f"{upload.name} is not a PNG, JPEG, GIF or WebP image.")
            if upload.size > MAX_IMAGE_BYTES:
                raise forms.ValidationError(f"{upload.name} is larger than 5 MB.")
        return files

    def clean(self):
        data = super().clean()
        if data.get("agent") == "command" and not data.get("agent_command", "").strip():
            self.add_error("agent_command", "The command agent needs a command.")
        return data

    def prompt_with_attachments(self) -> str:
        """The prompt, with links to the uploaded images appended. The images are stored under
        a random folder; `attach_to` then gives them to the session the prompt starts, whose
        repository's members alone may see them (sessions.views.session_attachment)."""
        text = self.cleaned_data["prompt"]
        folder = uuid.uuid4().hex
        for upload in self.cleaned_data.get("images") or []:
            name = default_storage.save(f"{ATTACHMENTS}/{folder}/{upload.name}", upload)
            stored = name.rsplit("/", 1)[-1]
            self.stored_images.append((folder, stored))
            self.saved_images.append(reverse("sessions:attachment", args=[folder, stored]))
        if self.saved_images:
            text += "\n\nAttached images:\n" + "\n".join(self.saved_images)
        return text

    def attach_to(self, session, *, uploaded_by) -> None:
        """Record the stored images as `session`'s attachments."""
        Attachment.objects.bulk_create(
            Attachment(folder=folder, name=name, session=session, uploaded_by=uploaded_by)
            for folder, name in self.stored_images
        )

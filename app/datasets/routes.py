"""``/v1/datasets``: the built-in datasets under the server's data root."""

from __future__ import annotations

from fastapi import APIRouter

from app.core.deps import SettingsDep
from app.datasets.schemas import DatasetList, DatasetRead
from app.tenants.deps import ViewerTenant
from bind_core.data.datasets import available

router = APIRouter(prefix="/datasets", tags=["datasets"])


@router.get("", response_model=DatasetList)
def list_datasets(settings: SettingsDep, _tenant: ViewerTenant) -> DatasetList:
    """The paper's datasets and whether each is present; empty when the server has no data root."""
    if settings.data_root is None:
        return DatasetList(items=[])
    return DatasetList(items=[DatasetRead.model_validate(info) for info in available(settings.data_root)])

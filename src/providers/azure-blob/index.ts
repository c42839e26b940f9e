// shedlock/azure-blob: the provider and the inspector, on lock blobs in an Azure Storage container.
export type { AzureBlobConditions, AzureBlockBlobClient, AzureContainerClient } from './blobs.ts'
export { type AzureBlobLockInspectorOptions, azureBlobLockInspector } from './inspector.ts'
export { type AzureBlobLockProviderOptions, azureBlobLockProvider } from './provider.ts'
